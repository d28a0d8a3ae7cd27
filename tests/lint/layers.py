#!/usr/bin/env python3
"""Layers use only what docs/architecture.md's table says they may. Fails, naming each line, when a
file includes a header of a layer its own layer may not use, when a front end (server, envoy,
cli) includes a store implementation, or when the server or envoy includes any store header.

The table is the "## Layers" table of docs/architecture.md: a row per layer, its name in the first
column and its folder (`src/<layer>`) in the second, what it may use in the last: layer names,
"everything below" (every layer of an earlier row) and libraries, which are not checked here. Use is
transitive: a layer that may use engine may use what engine may use. A file's layer is its folder:
src/<layer>/... or include/caudal/<layer>/...; includes are checked in both spellings,
"caudal/<layer>/x.h" (public) and "<layer>/x.h" (private, under src/); test support under tests/
belongs to no layer. Unit tests beside the code (*_test.cc) may use a store implementation; they
still may not include a layer their own may not use.

Usage: layers.py SOURCE_DIR [FILE...]   (with FILEs: check those alone, e.g. a deliberate mistake)
"""
import pathlib
import re
import sys

# Headers generated from proto/ are included as "envoy/service/...", "grpc/health/...": not the
# envoy layer's own headers.
GENERATED = re.compile(r'^(envoy/(config|extensions|service|type)|grpc)/')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FRONT_ENDS = {'server', 'envoy', 'cli'}
# A store implementation: what a front end reaches only through the Store interface and the
# store registry.
# The front ends that answer requests reach state only through the engine: no store header.
THROUGH_ENGINE = {'server', 'envoy'}
STORE_IMPLEMENTATIONS = re.compile(r'^(caudal/)?(redis/|store/memory_store\.h|store/shard_table\.h)')
FOLDER = re.compile(r'`src/([a-z_]+)`')


def may_use(root):
    """{layer: set of layers it may include}, from docs/architecture.md's layers table."""
    doc = root / 'docs' / 'architecture.md'
    text = doc.read_text()
    section = re.search(r'^## Layers\n(.*?)(?=^## )', text, re.S | re.M)
    if not section:
        sys.exit(f'layers.py: no "## Layers" section in {doc}')
    rows = [line for line in section.group(1).splitlines() if line.startswith('|')]
    if len(rows) < 3:
        sys.exit(f'layers.py: no layers table in {doc}')
    names = {row.strip('|').split('|')[0].strip() for row in rows[2:]}
    header = [c.strip() for c in rows[0].strip('|').split('|')]
    if header[0] != 'layer' or header[-1] != 'may use':
        sys.exit(f'layers.py: the layers table of {doc} must start with "layer" and end with '
                 f'"may use", not {header}')
    order, allowed = [], {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip('|').split('|')]
        folder = FOLDER.search(cells[1]) if len(cells) > 1 else None
        if not folder or folder.group(1) != cells[0]:
            sys.exit(f'layers.py: the row of "{cells[0]}" must name its folder `src/{cells[0]}`')
        layer, uses = cells[0], cells[-1]
        direct = set(order) if 'everything below' in uses else set()
        for word in re.findall(r'[a-z_]+', uses):
            if word == layer or word not in names:
                continue
            if word not in order:
                sys.exit(f'layers.py: {layer} may use {word}, whose row is not above it')
            direct.add(word)
        allowed[layer] = set(direct)  # earlier rows are complete: use is transitive
        for used in direct:
            allowed[layer] |= allowed[used]
        order.append(layer)
    listed = cmake_layers(root)
    if set(order) != set(listed):
        sys.exit(f'layers.py: {doc} lists the layers {order}, CAUDAL_LAYERS in CMakeLists.txt '
                 f'{listed}')
    return order, allowed


def cmake_layers(root):
    text = (root / 'CMakeLists.txt').read_text()
    block = re.search(r'set\(CAUDAL_LAYERS\s+(.*?)\)', text, re.S)
    if not block:
        sys.exit('layers.py: no CAUDAL_LAYERS in CMakeLists.txt')
    return [p.split('/')[-1] for p in block.group(1).split()]


def layer_of_file(path, order):
    parts = path.parts
    if len(parts) >= 2 and parts[0] == 'src' and parts[1] in order:
        return parts[1]
    if len(parts) >= 3 and parts[0] == 'include' and parts[1] == 'caudal' and parts[2] in order:
        return parts[2]
    return None


def layer_of_include(root, name, order):
    # Test support under tests/ (e.g. "redis/lua_replayer.h") is no layer's.
    if GENERATED.match(name) or not ((root / 'src' / name).exists() or
                                     (root / 'include' / name).exists()):
        return None
    parts = name.split('/')
    if parts[0] == 'caudal' and len(parts) >= 3 and parts[1] in order:
        return parts[1]
    if len(parts) >= 2 and parts[0] in order:
        return parts[0]
    return None


def check(root, files, order, allowed):
    problems = []
    for path in files:
        rel = path.relative_to(root)
        layer = layer_of_file(rel, order)
        if layer is None:
            continue
        is_test = rel.name.endswith('_test.cc')
        for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1)
            target = layer_of_include(root, name, order)
            if target is not None and target != layer and target not in allowed[layer]:
                problems.append(f'{rel}:{number}: the {layer} layer includes "{name}" of the '
                                f'{target} layer, which it may not use')
            elif layer in THROUGH_ENGINE and not is_test and target in ('store', 'redis'):
                problems.append(f'{rel}:{number}: the {layer} layer includes "{name}": it '
                                f'reaches state through the engine, never a store header')
            elif layer in FRONT_ENDS and not is_test and STORE_IMPLEMENTATIONS.match(name):
                problems.append(f'{rel}:{number}: the front end {layer} includes the store '
                                f'implementation "{name}" (use the Store interface and the '
                                f'store registry)')
    return problems


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    order, allowed = may_use(root)
    if len(sys.argv) > 2:
        files = [pathlib.Path(f).resolve() for f in sys.argv[2:]]
    else:
        files = sorted(p for d in ('src', 'include') for p in (root / d).rglob('*')
                       if p.suffix in ('.h', '.cc'))
    problems = check(root, files, order, allowed)
    if problems:
        print('includes against the layers (docs/architecture.md):')
        print('\n'.join(problems))
        return 1
    print(f'{len(files)} files: every include is of a layer its own may use')
    return 0


if __name__ == '__main__':
    sys.exit(main())
