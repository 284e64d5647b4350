"""What `hashbroker` needs of its subcommands before it knows which one runs: the exit statuses they
share and the help lines of those it imports only when they run (`ctl`, `plugins`).

The statuses are rabbitmqctl's and rabbitmq-plugins' (sysexits.h): 64 usage, 65 data error, 67 no
such user, 69 not found / unavailable, 70 software error, 77 access refused, 78 configuration error.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """An exit status, by its sysexits.h name without the `EX_`."""

    OK = 0
    USAGE = 64
    DATAERR = 65
    NOUSER = 67
    UNAVAILABLE = 69
    SOFTWARE = 70
    NOPERM = 77
    CONFIG = 78


EX_OK, EX_USAGE, EX_DATAERR, EX_NOUSER, EX_UNAVAILABLE, EX_SOFTWARE, EX_NOPERM, EX_CONFIG = Exit
"""The same statuses under their sysexits.h names."""

CTL_HELP = "rabbitmqctl-style commands against a running broker's management API"
PLUGINS_HELP = "list, enable or disable plugins (rabbitmq-plugins offline: takes effect at the next start)"
