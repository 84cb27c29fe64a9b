// A real js-waku client (the @waku/sdk LightNode) querying one store node over libp2p.
//
// Usage: node query_store.mjs --addr <ws multiaddr with /p2p/> --cluster 16
//          --pubsub /waku/2/rs/16/128 --content t1,t2 [--page-size 20]
//          [--mode pages|hashes] [--direction forward|backward] [--timeout-ms 20000]
//          [--delay-ms 0]   (wait this long between "peer usable" and the first query)
//          [--connect dial|config]  dial: node.dial(addr); config: the address given as
//            createLightNode({store: {peers: [addr]}}), which the sdk dials by itself
//
// Prints one JSON object per line on stdout:
//   {"kind":"peer", "peerId", "protocols", "shardInfo"}   once the node is usable as store peer
//   mode "pages": {"kind":"page", "index", "messages":[{hash, pubsubTopic, contentTopic,
//                  payload (base64), timestamp (ns, decimal string), version}]} per page, as
//                  the sdk's Store.queryGenerator yields them (its own paging: the next
//                  cursor is the last message's hash; it stops on an empty page)
//   mode "hashes": {"kind":"hash-page", "index", "statusCode", "entries":[{hash, pubsubTopic}],
//                  "cursor"} per page of a hash-only (include_data=false) content query, then
//                  {"kind":"fetched", "messages":[...]} from a by-hash query of every hash
//                  through the sdk's queryGenerator({messageHashes})
//   {"kind":"done", ...counts}
// Exits 1 with a message on stderr if the peer is not usable in time or a query fails.

import { createLightNode, DecodedMessage, Protocols, utils, waku } from "@waku/sdk";
import { proto_store } from "@waku/proto";
import { multiaddr } from "@multiformats/multiaddr";

const { StoreCodec } = waku;

function parseArgs(argv) {
  const out = {
    addr: process.env.WAKU_STORE_ADDR,
    cluster: "16",
    pubsub: undefined,
    content: "",
    "page-size": "20",
    mode: "pages",
    direction: "forward",
    "timeout-ms": "20000",
    "delay-ms": "0",
    connect: "dial",
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in out) || i + 1 >= argv.length) {
      throw new Error(`unknown or incomplete argument: ${argv[i]}`);
    }
    out[key] = argv[i + 1];
  }
  if (!out.addr) throw new Error("--addr (the store node's multiaddr with /p2p/<id>) is required");
  if (!out.pubsub) throw new Error("--pubsub is required");
  const contentTopics = out.content.split(",").filter(Boolean);
  if (!contentTopics.length) throw new Error("--content needs at least one content topic");
  if (!["pages", "hashes"].includes(out.mode)) throw new Error(`--mode ${out.mode}: pages or hashes`);
  if (!["dial", "config"].includes(out.connect)) throw new Error(`--connect ${out.connect}: dial or config`);
  if (!["forward", "backward"].includes(out.direction)) {
    throw new Error(`--direction ${out.direction}: forward or backward`);
  }
  return {
    addr: out.addr,
    clusterId: Number(out.cluster),
    pubsubTopic: out.pubsub,
    contentTopics,
    pageSize: Number(out["page-size"]),
    mode: out.mode,
    forward: out.direction === "forward",
    timeoutMs: Number(out["timeout-ms"]),
    delayMs: Number(out["delay-ms"]),
    connect: out.connect,
  };
}

const hex = (bytes) => Buffer.from(bytes).toString("hex");
const b64 = (bytes) => Buffer.from(bytes ?? []).toString("base64");
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// The bridge stores Status messages as they travel: version 1 (Waku v1 payload encryption).
// The sdk's createDecoder handles version 0 only (it drops other versions), and decrypting is
// not this client's business: this decoder hands every message over as it came, as the
// sdk's own DecodedMessage (whose hash is the deterministic 14/WAKU2-MESSAGE hash).
class RawDecoder {
  constructor(contentTopic, pubsubTopic) {
    this.contentTopic = contentTopic;
    this.pubsubTopic = pubsubTopic;
  }
  async fromWireToProtoObj() {
    throw new Error("RawDecoder only decodes store results");
  }
  async fromProtoObj(pubsubTopic, protoMessage) {
    return new DecodedMessage(pubsubTopic, protoMessage);
  }
}

function describe(message) {
  return {
    hash: message.hashStr,
    pubsubTopic: message.pubsubTopic,
    contentTopic: message.contentTopic,
    payload: b64(message.payload),
    timestamp: message.proto.timestamp === undefined ? null : String(message.proto.timestamp),
    version: message.version,
  };
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function usableStorePeer(node, args) {
  const ma = multiaddr(args.addr);
  const peerIdStr = ma.getPeerId();
  if (!peerIdStr) throw new Error(`${args.addr} has no /p2p/<peer id>`);
  // Wait as the sdk documents (identify lists the store codec + the metadata handshake),
  // registered before dialing so the identify event cannot be missed.
  const ready = node.waitForPeers([Protocols.Store], args.timeoutMs);
  if (args.connect === "dial") {
    await withTimeout(node.dial(ma, [Protocols.Store]), args.timeoutMs, `dialing ${args.addr}`);
  }
  await ready;
  const peer = await node.libp2p.peerStore.get(node.libp2p.getPeers().find((p) => p.toString() === peerIdStr));
  const shardBytes = peer.metadata.get("shardInfo");
  const shardInfo = shardBytes ? utils.decodeRelayShard(shardBytes) : null;
  emit({ kind: "peer", peerId: peerIdStr, protocols: peer.protocols, shardInfo });
  // What the sdk's Store would pick for this pubsub topic (identify + metadata shards).
  const picked = await node.store.peerManager.getPeers({ protocol: Protocols.Store, pubsubTopic: args.pubsubTopic });
  if (!picked.some((p) => p.toString() === peerIdStr)) {
    throw new Error(`the sdk does not select ${peerIdStr} as store peer for ${args.pubsubTopic} (shards ${JSON.stringify(shardInfo)})`);
  }
  return peer.id;
}

async function queryPages(node, args, decoders) {
  let index = 0;
  let count = 0;
  const seen = new Set();
  for await (const page of node.store.queryGenerator(decoders, {
    paginationLimit: args.pageSize,
    paginationForward: args.forward,
  })) {
    const messages = (await Promise.all(page)).map((m) => {
      if (!m) throw new Error(`page ${index}: a message the decoders did not decode`);
      return describe(m);
    });
    messages.forEach((m) => seen.add(m.hash));
    count += messages.length;
    emit({ kind: "page", index, messages });
    index += 1;
  }
  emit({ kind: "done", mode: "pages", pages: index, messages: count, distinct: seen.size });
}

// --- the hash-only query: the sdk's Store API yields only decoded bodies, so a query with
// include_data=false is made the way the sdk's StoreCore makes its requests: one
// length-prefixed StoreQueryRequest per stream, read to the end, one StoreQueryResponse.

function encodeVarint(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return Uint8Array.from(out);
}

function decodeLengthPrefixed(bytes) {
  let len = 0;
  let shift = 0;
  let i = 0;
  for (;;) {
    if (i >= bytes.length) throw new Error("store response: truncated length prefix");
    const b = bytes[i++];
    len += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if (!(b & 0x80)) break;
  }
  if (bytes.length - i !== len) {
    throw new Error(`store response: length prefix ${len}, ${bytes.length - i} bytes follow`);
  }
  return bytes.subarray(i);
}

async function rawQuery(node, peerId, request) {
  const body = proto_store.StoreQueryRequest.encode(request);
  const stream = await node.libp2p.dialProtocol(peerId, StoreCodec);
  const frame = new Uint8Array([...encodeVarint(body.length), ...body]);
  await stream.sink([frame]);
  const chunks = [];
  for await (const chunk of stream.source) chunks.push(chunk.subarray());
  const response = proto_store.StoreQueryResponse.decode(decodeLengthPrefixed(Buffer.concat(chunks)));
  if (response.requestId !== request.requestId) {
    throw new Error(`store response echoes request id ${response.requestId}, sent ${request.requestId}`);
  }
  if (!response.statusCode || response.statusCode >= 300) {
    throw new Error(`store query failed: ${response.statusCode} ${response.statusDesc}`);
  }
  return response;
}

async function queryHashes(node, args, peerId, decoders) {
  const entries = [];
  let cursor;
  let index = 0;
  do {
    const response = await rawQuery(node, peerId, {
      requestId: crypto.randomUUID(),
      includeData: false,
      pubsubTopic: args.pubsubTopic,
      contentTopics: args.contentTopics,
      messageHashes: [],
      paginationCursor: cursor,
      paginationForward: args.forward,
      paginationLimit: BigInt(args.pageSize),
    });
    const page = response.messages.map((kv) => {
      if (kv.message) throw new Error("a hash-only query answered with a message body");
      return { hash: hex(kv.messageHash ?? []), pubsubTopic: kv.pubsubTopic ?? null };
    });
    cursor = response.paginationCursor;
    emit({ kind: "hash-page", index, statusCode: response.statusCode, entries: page, cursor: cursor ? hex(cursor) : null });
    entries.push(...page);
    index += 1;
  } while (cursor && cursor.length);

  // By-hash fetch through the sdk's public Store API, at most 100 hashes a query (the
  // sdk repeats the whole hash list on every page; stores cap a query's hash count).
  const fetched = [];
  const chunk = Math.min(args.pageSize, 100);
  for (let start = 0; start < entries.length; start += chunk) {
    const hashes = entries.slice(start, start + chunk).map((e) => Uint8Array.from(Buffer.from(e.hash, "hex")));
    for await (const page of node.store.queryGenerator(decoders, {
      messageHashes: hashes,
      includeData: true,
      paginationLimit: args.pageSize,
      peerId,
    })) {
      for (const m of await Promise.all(page)) {
        if (!m) throw new Error("by-hash fetch: an entry without a decodable message");
        fetched.push(describe(m));
      }
    }
  }
  emit({ kind: "fetched", messages: fetched });
  emit({ kind: "done", mode: "hashes", pages: index, hashes: entries.length, fetched: fetched.length });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const node = await createLightNode({
    defaultBootstrap: false,
    networkConfig: { clusterId: args.clusterId },
    // Node, loopback, plain ws: the sdk's default filter dials only wss.
    libp2p: { filterMultiaddrs: false, hideWebSocketInfo: true },
    // --connect config: how a web app names its store node (the sdk's bootstrap discovery
    // hands it to its dialer; Store prefers it when it picks a peer).
    ...(args.connect === "config" ? { store: { peers: [args.addr] } } : {}),
  });
  try {
    const peerId = await usableStorePeer(node, args);
    // A web app queries when its user asks, with the streams js-waku pre-opened idle since.
    if (args.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, args.delayMs));
    const decoders = args.contentTopics.map((t) => new RawDecoder(t, args.pubsubTopic));
    if (args.mode === "pages") await withTimeout(queryPages(node, args, decoders), args.timeoutMs * 3, "paged query");
    else await withTimeout(queryHashes(node, args, peerId, decoders), args.timeoutMs * 3, "hash query");
  } finally {
    await node.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`query_store: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
