// A js-libp2p server (libp2p 2.x, the stack @waku/sdk ships: WebSockets, Noise, mplex) for
// the project's own libp2p client (tests/waku_legacy/p2p/test_native_client.py): it answers
// /test/echo/1.0.0, one length-prefixed request, with "echo:" + the request, then closes.
//
// Usage: node echo_server.mjs   prints {"addrs": [...]} once listening, serves until killed.

import { createLibp2p } from "libp2p";
import { webSockets } from "@libp2p/websockets";
import { noise } from "@chainsafe/libp2p-noise";
import { mplex } from "@libp2p/mplex";
import * as lp from "it-length-prefixed";
import { pipe } from "it-pipe";

const node = await createLibp2p({
  addresses: { listen: ["/ip4/127.0.0.1/tcp/0/ws"] },
  transports: [webSockets()],
  connectionEncrypters: [noise()],
  streamMuxers: [mplex()],
});

await node.handle("/test/echo/1.0.0", async ({ stream }) => {
  await pipe(
    stream.source,
    (source) => lp.decode(source),
    async function* (source) {
      for await (const request of source) {
        const body = request.subarray();
        const answer = new Uint8Array(5 + body.length);
        answer.set(new TextEncoder().encode("echo:"));
        answer.set(body, 5);
        yield answer;
        return;
      }
    },
    (source) => lp.encode(source),
    stream.sink,
  );
});

console.log(JSON.stringify({ addrs: node.getMultiaddrs().map(String) }));
