"""Files shipped beside the code: inside the package when installed from a wheel (pyproject's
force-include), at the top of the repository in a checkout."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def shipped(installed_name: str, checkout_name: str) -> Path | None:
    """``gputop/<installed_name>`` when installed, else ``<checkout>/<checkout_name>``; None if neither."""
    installed = PACKAGE / installed_name
    if installed.exists():
        return installed
    checkout = PACKAGE.parent / checkout_name
    # The pyproject check keeps an installed copy from picking up an unrelated file beside site-packages.
    if checkout.exists() and (PACKAGE.parent / "pyproject.toml").is_file():
        return checkout
    return None
