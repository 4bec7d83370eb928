from fugu.cli import main

raise SystemExit(main())
