#!/usr/bin/env python3
"""Layers point one way. Fails, naming each line, when a file includes a header of a higher layer,
or when a front end (server, envoy, cli) includes a store implementation.

A file's layer is its folder: src/<layer>/... or include/caudal/<layer>/...; the layers and their
order are CAUDAL_LAYERS in the top-level CMakeLists.txt. Includes are checked in both spellings,
"caudal/<layer>/x.h" (public) and "<layer>/x.h" (private, under src/); test support under
tests/ belongs to no layer. Unit tests beside the code
(*_test.cc) may use a store implementation; they still may not include a higher layer.

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
STORE_IMPLEMENTATIONS = re.compile(r'^(caudal/)?(redis/|store/memory_store\.h|store/shard_table\.h)')


def layers(root):
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


def check(root, files, order):
    rank = {name: i for i, name in enumerate(order)}
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
            if target is not None and rank[target] > rank[layer]:
                problems.append(f'{rel}:{number}: the {layer} layer includes "{name}" of the '
                                f'higher {target} layer')
            elif layer in FRONT_ENDS and not is_test and STORE_IMPLEMENTATIONS.match(name):
                problems.append(f'{rel}:{number}: the front end {layer} includes the store '
                                f'implementation "{name}" (use the Store interface and the '
                                f'store registry)')
    return problems


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    order = layers(root)
    if len(sys.argv) > 2:
        files = [pathlib.Path(f).resolve() for f in sys.argv[2:]]
    else:
        files = sorted(p for d in ('src', 'include') for p in (root / d).rglob('*')
                       if p.suffix in ('.h', '.cc'))
    problems = check(root, files, order)
    if problems:
        print('includes against the layers (docs/architecture.md):')
        print('\n'.join(problems))
        return 1
    print(f'{len(files)} files: every include points to its own layer or a lower one')
    return 0


if __name__ == '__main__':
    sys.exit(main())
