"""Read one catalog YAML file strictly: bounded size and depth, no duplicate keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# The largest catalog file (a model with its config.json) is a few kilobytes.
MAX_FILE_BYTES = 1 << 20


class YamlProblem(ValueError):
    """Why a file could not be read as YAML: one line, no traceback."""


# libyaml's parser where PyYAML was built with it: the same documents about seven
# times faster (every command loads the whole catalog). Construction and implicit
# tags stay in Python, below; libyaml refuses nesting past 1,000 levels itself.
_Base: Any = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class _StrictLoader(_Base):  # type: ignore[misc]
    """A safe loader that refuses a key given twice and leaves dates as text.

    PyYAML would keep the last of two equal keys silently.
    """


def _mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: construct_mapping reports it
            break
        if duplicate:
            line = key_node.start_mark.line + 1
            raise YamlProblem(f"key {str(key)[:40]!r} given twice (line {line})")
        seen.add(key)
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=True)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
# Date-like scalars stay text: PyYAML turns ``2025-11-16`` into a date itself and
# raises a bare ValueError on ``2025-11-32``; as text, the schema checks the date
# and the error names the file, the entry and the field like any other.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(path: Path) -> Any:
    """The YAML document in ``path``; YamlProblem for anything that is not plain, sane YAML."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise YamlProblem(f"cannot read file: {exc.strerror or exc}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise YamlProblem(f"larger than {MAX_FILE_BYTES:,} bytes: not a catalog file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlProblem(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: builds plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise YamlProblem(f"malformed YAML{where}") from exc
    except RecursionError:
        raise YamlProblem("nested too deeply: not a catalog file") from None
