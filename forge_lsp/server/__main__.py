"""`forge-lsp` entry point."""

import sys


def main() -> int:
    print("forge-lsp: the language server is not available in this version yet; "
          "use the `forge` command line (forge eval ...).", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
