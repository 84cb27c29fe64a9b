"""Complete example configs, one copy: the config tests check what they parse to, and
bench/fuzz_decoders.py mutates them as seeds, so the fuzzer starts from every key the tests
know."""

from __future__ import annotations

__all__ = ["full_bridge_config", "full_migrate_config"]


def full_migrate_config(community: str, channel: str) -> str:
    """A migration config (``migrate --config``) using every section and source kind."""
    return f"""
[spark]
master = "local[2]"
shuffle_partitions = 4
conf = {{ "spark.driver.memory" = "1g" }}

[[source]]
kind = "mailserver-postgres"
dsn = "postgresql://postgres@127.0.0.1:5432/test"

[[source]]
kind = "mailserver-leveldb"
path = "ms1"
name = "leveldb-eu"
partitions = 8

[[source]]
kind = "envelope-dump"
path = "dumps/*.dump"

[[source]]
kind = "store-rest"
url = "http://127.0.0.1:8645"
pubsub_topic = "/waku/2/rs/16/128"
content_topics = ["/waku/1/0x01020304/rfc26"]
start_time = 1
end_time = 1700000000000000000
page_size = 50
timeout = 2.5

[[source]]
kind = "store-rest"
path = "pages"

[[source]]
kind = "store-sqlite"
path = "nwaku.sqlite3"

[[community]]
id = "{community}"
channels = ["{channel}"]
shard = 128
key_file = "community.key"
name = "example"

[pipeline]
now = 1700000000
flavour = "seed-spec"

[output]
store = "sqlite:store.sqlite3"
archive_dir = "archives"
torrent_dir = "torrents"
"""


def full_bridge_config(community: str, channel: str) -> str:
    """A bridge config (``serve --config``) using every section; it reads ``admin.token``
    next to it."""
    return f"""
[server]
listen = "0.0.0.0:9000"
reader_threads = 2
shutdown_timeout = "45s"

[store]
url = "store.sqlite3"

[v1]
listen = "127.0.0.1:30303"
node_key_file = "keys/nodekey"
min_pow = 0.002
rate_limit = 0
trusted_peers = ["{"ab" * 64}"]
live_window = "10m"

[relay]
url = "http://127.0.0.1:8646/"
timeout = 5
retries = 2

[history]
nodes = ["http://store-1:8645", "https://store-2"]
window = "30d"
interval = "2h"

[archive]
archive_dir = "archives"
torrent_dir = "torrents"
seed_listen = "127.0.0.1:0"
trackers = false
interval = "7d"
republish_interval = "6h"

[[community]]
id = "{community}"
channels = ["{channel}"]
shard = 128
key_file = "community.key"

[admin]
token_file = "admin.token"

[logging]
level = "debug"
format = "text"
"""
