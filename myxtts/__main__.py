import os
import signal
import sys

# Until the first modules have loaded, a Ctrl-C is kept and answered after (see
# myxtts.cli.ctrl_c_deferred, which this cannot import before they load).
_got: list[int] = []
signal.signal(signal.SIGINT, lambda signum, frame: _got.append(signum))
from myxtts.cli import main  # noqa: E402

signal.signal(signal.SIGINT, signal.default_int_handler)
if _got:  # one line, as main() gives
    sys.stderr.write("myxtts: interrupted\n")
    sys.stderr.flush()
    os._exit(130)

raise SystemExit(main())
