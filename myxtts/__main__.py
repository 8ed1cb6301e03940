from myxtts.cli import main

raise SystemExit(main())
