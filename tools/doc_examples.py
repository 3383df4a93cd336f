#!/usr/bin/env python3
"""Count the public functions of the crate with and without a doc example.

A source-level approximation of rustdoc's `missing_doc_code_examples` (a nightly lint):
a function counts as public when it is `pub fn` in a module reachable through `pub mod`
from `src/lib.rs`, or in a private module under a name that a `pub use` re-exports; a
method counts when its `impl` block's type is public (declared `pub` in a public module,
or re-exported). It has an example when its doc comment holds a code fence. Trait impls
(no `pub fn`) and `pub(crate)` items are not counted.

    python3 tools/doc_examples.py            # the counts
    python3 tools/doc_examples.py --missing  # and every function without an example
    python3 tools/doc_examples.py --root DIR # another checkout (e.g. a `git archive` of main)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if '--root' in sys.argv:
    ROOT = os.path.abspath(sys.argv[sys.argv.index('--root') + 1])
MOD_RE = re.compile(r'^(\s*)(pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;')
PATH_RE = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
FN_RE = re.compile(r'^(\s*)pub\s+(?:const\s+)?(?:unsafe\s+)?fn\s+(\w+)')
TYPE_RE = re.compile(r'^\s*pub\s+(?:struct|enum|trait|type|union)\s+(\w+)')
IMPL_RE = re.compile(r'^impl\b(?:<[^{]*?>)?\s+(.*?)\s*(?:where\b.*)?\{?\s*$')


def modules():
    """(file, public) for every module file reachable from src/lib.rs."""
    out = []

    def walk(path, public, is_mod_root):
        out.append((path, public))
        base = os.path.dirname(path) if is_mod_root else os.path.splitext(path)[0]
        lines = open(path, encoding='utf-8').read().split('\n')
        for k, line in enumerate(lines):
            m = MOD_RE.match(line)
            if not m or m.group(1):
                continue
            name = m.group(3)
            explicit = PATH_RE.search(lines[k - 1]) if k else None
            if explicit:
                child = os.path.normpath(os.path.join(os.path.dirname(path), explicit.group(1)))
                walk(child, public and m.group(2) == 'pub ', child.endswith('mod.rs'))
                continue
            for cand, root in ((os.path.join(base, name + '.rs'), False), (os.path.join(base, name, 'mod.rs'), True)):
                if os.path.exists(cand):
                    walk(cand, public and m.group(2) == 'pub ', root)
                    break

    walk(os.path.join(ROOT, 'src', 'lib.rs'), True, True)
    return out


def main():
    mods = modules()
    texts = {f: open(f, encoding='utf-8').read().split('\n') for f, _ in mods}
    reexported = set()
    for lines in texts.values():
        src = '\n'.join(lines)
        for m in re.finditer(r'pub\s+use\s+([^;]+);', src):
            reexported.update(re.findall(r'\b(\w+)\b', m.group(1)))
    public_types = set()
    for f, public in mods:
        for line in texts[f]:
            m = TYPE_RE.match(line)
            if m and (public or m.group(1) in reexported):
                public_types.add(m.group(1))
    with_ex, without = 0, []
    for f, public in mods:
        lines = texts[f]
        impl_type = None
        for k, line in enumerate(lines):
            if line.startswith('impl'):
                m = IMPL_RE.match(line)
                head = m.group(1) if m else ''
                if ' for ' in head:
                    impl_type = None  # a trait impl: no public inherent methods
                else:
                    impl_type = re.sub(r'<.*', '', head).strip()
            elif line.startswith('}'):
                pass
            m = FN_RE.match(line)
            if not m:
                continue
            indent, name = m.group(1), m.group(2)
            if indent:
                if indent != '    ' or impl_type is None or impl_type not in public_types:
                    continue
                label = f'{impl_type}::{name}'
            else:
                if not (public or name in reexported):
                    continue
                label = name
            j = k - 1
            has = False
            while j >= 0 and (lines[j].strip().startswith('///') or lines[j].strip().startswith('#[')):
                if '```' in lines[j]:
                    has = True
                j -= 1
            if has:
                with_ex += 1
            else:
                without.append(f'{os.path.relpath(f, ROOT)}:{k + 1}: {label}')
    total = with_ex + len(without)
    print(f'public functions: {total}, with a doc example: {with_ex}, without: {len(without)}')
    if '--missing' in sys.argv:
        print('\n'.join(without))


if __name__ == '__main__':
    main()
