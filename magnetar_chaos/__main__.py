"""``python -m magnetar_chaos run|check|fuzz ...``."""
from magnetar_chaos.cli import main

if __name__ == "__main__":
    main()
