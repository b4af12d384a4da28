"""Copy real traces from ../shared/traces into tests/data, with MANIFEST rows and licences.

Run from the repository root: ``python tests/data/copy_from_shared.py PATH...`` where each PATH
is relative to shared/traces (as in MANIFEST.tsv). Idempotent.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parents[2] / "shared" / "traces"


def main(paths: list[str]) -> None:
    manifest = (SHARED / "MANIFEST.tsv").read_text().splitlines()
    header, rows = manifest[0], {r.split("\t")[0]: r for r in manifest[1:]}
    ours_path = ROOT / "MANIFEST.tsv"
    ours = ours_path.read_text().splitlines()[1:] if ours_path.exists() else []
    have = {r.split("\t")[0] for r in ours}
    for p in paths:
        src = SHARED / p
        dst = ROOT / p
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        if p in rows and p not in have:
            ours.append(rows[p])
            have.add(p)
    ours_path.write_text("\n".join([header, *sorted(ours)]) + "\n")
    (ROOT / "LICENSES").mkdir(exist_ok=True)
    for lic in (SHARED / "LICENSES").iterdir():
        shutil.copyfile(lic, ROOT / "LICENSES" / lic.name)
    # ATTRIBUTION.md here is ../shared's plus this repo's own paragraphs (generated/, derived/, the
    # oracles copied): copied only when absent, never overwritten; lines of ../shared's that ours
    # lacks are listed for a person to merge
    ours_attr = ROOT / "ATTRIBUTION.md"
    if not ours_attr.exists():
        shutil.copyfile(SHARED / "ATTRIBUTION.md", ours_attr)
    else:
        have_lines = set(ours_attr.read_text().splitlines())
        missing = [ln for ln in (SHARED / "ATTRIBUTION.md").read_text().splitlines() if ln and ln not in have_lines]
        for ln in missing:
            print(f"ATTRIBUTION.md lacks a line of ../shared's; merge it by hand: {ln}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
