"""Which build of `broker.protocol.publish_scan` runs: its mypyc-compiled twin when current, else pure.

See `exchanges.native_twin` (the rule) and `setup.py` (the build). `IMPLEMENTATION` is "mypyc" or
"python"; `REASON` says why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.protocol import publish_scan as _pure
from exchanges import native_twin

log = logging.getLogger("hashbroker.protocol")

NATIVE_MODULE = "broker.protocol._publish_scan_native"

module, IMPLEMENTATION, REASON = native_twin.choose(_pure, NATIVE_MODULE, "publish scanner")
if "built from another" in REASON:  # a stale build is worth a warning, a plain absence is not
    log.warning("interpreted publish scanner: %s", REASON)

if TYPE_CHECKING:  # the same signature either way
    from broker.protocol.publish_scan import scan
else:
    scan = module.scan
