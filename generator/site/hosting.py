"""What a static host takes: the built site's size against GitHub Pages' limit."""

from __future__ import annotations

# "Published GitHub Pages sites may be no larger than 1 GB."
# (https://docs.github.com/en/pages/getting-started-with-github-pages/github-pages-limits);
# taken as 10^9 bytes, the smaller reading of "1 GB".
PAGES_MAX_BYTES = 1_000_000_000


def size_line(total_bytes: int, files: int) -> tuple[str, bool]:
    """The build's size line, and whether the site is over what GitHub Pages publishes.

    >>> size_line(995_000_000, 78_036)
    ('size: 0.995 GB in 78,036 files, 0.5 % under the 1 GB GitHub Pages publishes', False)
    >>> size_line(1_020_000_000, 80_000)[1]
    True
    """
    gb = total_bytes / 1e9
    share = abs(1 - total_bytes / PAGES_MAX_BYTES) * 100
    over = total_bytes > PAGES_MAX_BYTES
    side = "over" if over else "under"
    line = f"size: {gb:.3f} GB in {files:,} files, {share:.1f} % {side} the 1 GB "
    line += "GitHub Pages publishes"
    return line, over
