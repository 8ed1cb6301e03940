import os
import sys

try:
    from myxtts.cli import main
except KeyboardInterrupt:  # Ctrl-C while the first modules load: one line, as main() gives
    sys.stderr.write("myxtts: interrupted\n")
    sys.stderr.flush()
    os._exit(130)

raise SystemExit(main())
