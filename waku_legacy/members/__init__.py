"""What members will see: a member's client of each generation applied to published archives.

:mod:`.published` reads what a member hears besides the archives (signed descriptions and
archive-link messages in v2 messages); :mod:`.preview` holds the rules (pure functions over
decoded archives, the newest signed ``CommunityDescription`` and the archive-link messages);
:mod:`.report` renders its document as a table or an HTML page. The CLI (``waku-legacy
members preview``) and the bridge's status report both call them.
"""
