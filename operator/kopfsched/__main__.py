from kopfsched.cli import main

raise SystemExit(main())
