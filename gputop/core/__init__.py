"""The pure core: models, rules and derived views. No I/O, no clock, no UI imports (a test enforces it)."""
