#!/usr/bin/env bash
# Production lines per workspace crate (issue #22 item 1): non-blank,
# non-comment lines of the .rs files under each crate's src/, leaving out
# tests (tests/ and benches/ directories, and every `#[cfg(test)]` item in
# src/, counted by brace depth). Prints a markdown table, largest first,
# with each crate's share of the workspace's production code.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, re
rows = []
for crate in sorted(os.listdir('.')):
    src = os.path.join(crate, 'src')
    if crate in ('target', 'fuzz') or not os.path.isfile(os.path.join(crate, 'Cargo.toml')) or not os.path.isdir(src):
        continue
    n = 0
    for dirpath, _, names in os.walk(src):
        for name in names:
            if not name.endswith('.rs'):
                continue
            skip_depth = None   # brace depth at which a cfg(test) item started
            pending = False     # saw #[cfg(test)], item not opened yet
            depth = 0
            in_block_comment = False
            for line in open(os.path.join(dirpath, name), encoding='utf-8'):
                s = line.strip()
                if in_block_comment:
                    if '*/' in s:
                        in_block_comment = False
                    continue
                if s.startswith('/*'):
                    in_block_comment = '*/' not in s
                    continue
                code = re.sub(r'"(\\.|[^"\\])*"', '""', s)
                code = re.sub(r"'(\\.|[^'\\])'", "''", code)
                code = code.split('//')[0]
                opens, closes = code.count('{'), code.count('}')
                if skip_depth is None and s.startswith('#[cfg(test)]'):
                    pending = True
                    continue
                if pending and skip_depth is None:
                    if opens > closes:
                        skip_depth = depth
                        pending = False
                        depth += opens - closes
                        continue
                    if code.endswith(';'):
                        pending = False
                        continue
                    continue
                depth += opens - closes
                if skip_depth is not None:
                    if depth <= skip_depth:
                        skip_depth = None
                    continue
                if not s or s.startswith('//'):
                    continue
                n += 1
    rows.append((n, crate))
total = sum(n for n, _ in rows)
print('| crate | production lines | share |')
print('| --- | ---: | ---: |')
for n, crate in sorted(rows, reverse=True):
    print(f'| `{crate}` | {n:,} | {100 * n / total:.1f}% |')
print(f'| total | {total:,} | 100% |')
PY
