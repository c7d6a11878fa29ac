"""docs/reference/settings.md: every setting with its default, from the settings dataclasses."""

from __future__ import annotations

from tssd.config import Settings
from tssd.config.render import SAMPLE_QUEUES, SAMPLE_STORAGE_CLASSES, _toml_value, describe
from tssd.reference.table import table


def _default(value: object) -> str:
    # 67_108_864 is the same TOML integer as 67108864, and readable.
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:_}"
    return _toml_value(value)


def render() -> str:
    sections: dict[str, list[tuple[str, str, str]]] = {}
    for key, value, _, doc in describe(Settings()):
        section, _, name = key.rpartition(".")
        sections.setdefault(section or "(top level)", []).append(
            (f"`{name or key}`", f"`{_default(value)}`", doc)
        )
    parts = [
        "# Settings\n\n"
        "Every setting of `tssd serve`, with its default. They are read from the TOML file "
        "named by `--config` or `TSSD_CONFIG` (a section per table below) and overridden by "
        "environment variables `TSSD_<SECTION>_<KEY>`. `tssd config` prints the settings in "
        "force and where each came from; `tssd config --sample` prints this list as a "
        "commented configuration file (`deploy/tssd.toml`).\n"
    ]
    for section, rows in sections.items():
        title = section if section == "(top level)" else f"[{section}]"
        parts.append(f"\n## {title}\n\n" + table(("key", "default", "meaning"), rows))
    for title, sample in (("queues", SAMPLE_QUEUES), ("storage_classes", SAMPLE_STORAGE_CLASSES)):
        lines = [line.removeprefix("#") for line in sample.strip("\n").splitlines()]
        # The sample's prose is "# text", its example tables "#   key = value".
        first = next(i for i, line in enumerate(lines) if line.startswith("   "))
        prose = " ".join(line.strip() for line in lines[:first] if line.strip())
        example = "\n".join(line.removeprefix("   ") for line in lines[first:])
        parts.append(f"\n## [[{title}]]\n\n{prose}\n\n```toml\n{example}\n```\n")
    return "".join(parts)
