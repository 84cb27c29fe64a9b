"""The bridge service: v1 mailserver and v2 store in one aiohttp process, archiving and
seeding on a schedule (``waku-legacy serve --config FILE``).

Modules (one concept each):

- :mod:`.config` -- the TOML configuration (typed, errors name the key; ``[[community]]``
  tables are read by :mod:`waku_legacy.community_config`, as the migration reads them);
- :mod:`.preflight` -- ``serve --check``: the store file, key files and listen addresses
  checked before anything starts;
- :mod:`.service` -- :class:`~.service.BridgeService`: which parts run from which config,
  in which order, and the service's state;
- :mod:`.lifecycle` -- the component base (an async context manager that declares what it
  needs), :class:`~.lifecycle.ServiceState`, and one ``AsyncExitStack`` that enters the parts
  after what they need and closes them in the reverse of their start;
- :mod:`.components` -- a package, one module per part (store, HTTP API, v1 listener, live
  bridge, relay publisher, libp2p listener, seeder, archiving, history pulls, leader lock,
  workers) with its open, close and health;
- :mod:`.view` -- what ``/health``, ``/debug/v1/info``, the status page and the admin API
  report, read from the running parts;
- :mod:`.http_api` -- the aiohttp application: nwaku-compatible store REST, ``/health``,
  ``/debug/v1/info``, ``/metrics``, bearer-token admin endpoints;
- :mod:`.store_rest_server` -- nwaku's REST store query semantics (sans-IO parsing, page
  building); the JSON itself is :mod:`waku_legacy.store.rest_json`;
- :mod:`.store_threads` -- the synchronous v2 store behind reader threads and one writer;
- :mod:`.live` -- live bridging v1 <-> v2 with a bounded seen-cache;
- :mod:`.relay` -- publishing through an nwaku node's REST relay API;
- :mod:`.tasks` -- stopping a queue worker within the shutdown grace;
- :mod:`.history` -- resumable 30-day pulls from v2 store nodes (the pager of
  :mod:`waku_legacy.store.rest_client`, which the migration uses too);
- :mod:`.archiver` -- 7-day archive runs, seeding, signed magnet-link (re)publishing (a
  package: the run's input, one community's archiver, the scheduler, the seeder thread,
  the link's reach);
- :mod:`.leader` -- one fenced archiving leader among bridges sharing a PostgreSQL store;
  :mod:`.workers` -- the REST API on every core (worker processes beside the primary);
- :mod:`.p2p` -- the libp2p listener glue (``[libp2p]``); :mod:`.store_peer` -- ``peerAddr``
  on ``/store/v3/messages``, asked with the project's own store client;
- :mod:`.status` -- the status report (``GET /debug/v1/status``); :mod:`.status_page` -- the
  same as the HTML status page (``GET /``); :mod:`.viewer` -- the history pages
  (``[viewer]``);
- :mod:`.clock` -- injectable wall clock; :mod:`.metrics` -- Prometheus registry;
  :mod:`.logs` -- JSON-lines logging; :mod:`.cli` -- ``waku-legacy serve``;
- :mod:`.http_guard` -- connection caps, timeouts and the request budget of the HTTP API;
  :mod:`.http_body` -- bounded reads of HTTP answers.
"""
