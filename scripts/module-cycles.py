#!/usr/bin/env python3
"""Module cycles inside each workspace crate (issue #22 item 1).

For every crate (a directory with Cargo.toml and src/), every .rs file is
a module (src/lib.rs and src/main.rs the root, src/a.rs and src/a/mod.rs
`a`, src/a/b.rs `a::b`; src/bin/*.rs are roots of their own). A file
depends on a module when it names a path into it: `crate::a::b`,
`super::x`, `self::x`, or a child module's bare name (`core::spawn` in
daemon/mod.rs). A dependency is attributed to the two sibling modules
under the deepest common parent (`daemon::api` -> `daemon::http`);
containment (a module and its own parent or child) is not a dependency.
Inline modules (tests included) count as part of their file. Comments are
skipped. Prints every strongly connected component of more than one
module and exits 1 if there is one; prints the edge count otherwise.
"""
import os, re, sys

ROOT = os.environ.get('FLEETWEFT_ROOT') or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def crates():
    for name in sorted(os.listdir(ROOT)):
        d = os.path.join(ROOT, name)
        if name in ('target', 'fuzz') or not os.path.isfile(os.path.join(d, 'Cargo.toml')):
            continue
        if os.path.isdir(os.path.join(d, 'src')):
            yield name, os.path.join(d, 'src')

def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[0] == 'bin':
        # each binary is its own crate root: bin/NAME.rs, bin/NAME/main.rs
        return ('bin:' + rel[1],) + tuple(p for p in rel[2:] if p != 'main' and p != 'mod')
    if rel in (['lib'], ['main']):
        return ()
    if rel[-1] == 'mod':
        rel = rel[:-1]
    return tuple(rel)

def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return '\n'.join(l.split('//')[0] if '"' not in l.split('//')[0] else l
                     for l in text.splitlines()
                     if not l.lstrip().startswith('//'))

PATH = re.compile(r'(?<![\w:])((?:crate|self|super)(?:::(?:super|\w+))*)(::\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\})?')

def refs(text, me, children):
    out = []
    for m in PATH.finditer(text):
        head = m.group(1).split('::')
        tails = [[]]
        if m.group(3) is not None:
            tails = []
            depth, item = 0, ''
            for ch in m.group(3) + ',':
                if ch == '{': depth += 1
                if ch == '}': depth -= 1
                if ch == ',' and depth == 0:
                    first = item.strip().split('::')[0].strip()
                    if first and first != 'self':
                        tails.append([first])
                    elif first == 'self':
                        tails.append([])
                    item = ''
                else:
                    item += ch
        for tail in tails:
            parts = head + tail
            if parts[0] == 'crate':
                base, rest = (), parts[1:]
                if me and me[0].startswith('bin:'):
                    base = me[:1]
            else:
                base, rest = me, parts
                while rest and rest[0] in ('super', 'self'):
                    if rest[0] == 'super':
                        base = base[:-1]
                    rest = rest[1:]
            out.append(base + tuple(rest))
    for child in children:
        for _ in re.finditer(r'(?<![\w:])' + re.escape(child) + r'::\w', text):
            out.append(me + (child,))
    return out

def main():
    cycles = 0
    total = 0
    for crate, src in crates():
        files = {}
        for dirpath, _, names in os.walk(src):
            for n in names:
                if n.endswith('.rs'):
                    p = os.path.join(dirpath, n)
                    files[module_of(src, p)] = p
        mods = set(files)
        edges = set()
        for me, p in files.items():
            children = {m[-1] for m in mods if len(m) == len(me) + 1 and m[:len(me)] == me}
            text = strip_comments(open(p, encoding='utf-8').read())
            for target in refs(text, me, children):
                # the longest prefix that is a module
                t = target
                while t and t not in mods:
                    t = t[:-1]
                k = 0
                while k < min(len(me), len(t)) and me[k] == t[k]:
                    k += 1
                if k == len(me) or k == len(t):
                    continue  # itself, an ancestor or a descendant
                edges.add((me[:k + 1], t[:k + 1]))
        total += len(edges)
        # Tarjan's strongly connected components
        graph = {}
        for a, b in edges:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
        index, low, stack, on, comps = {}, {}, [], set(), []
        sys.setrecursionlimit(10000)
        def visit(v):
            index[v] = low[v] = len(index)
            stack.append(v); on.add(v)
            for w in graph[v]:
                if w not in index:
                    visit(w); low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v: break
                if len(comp) > 1:
                    comps.append(comp)
        for v in sorted(graph):
            if v not in index:
                visit(v)
        name = lambda m: '::'.join(m) or '(root)'
        for comp in comps:
            cycles += 1
            members = sorted(comp)
            inner = sorted((a, b) for a, b in edges if a in comp and b in comp)
            print(f'{crate}: cycle among {", ".join(name(m) for m in members)}')
            for a, b in inner:
                print(f'    {name(a)} -> {name(b)}')
    if cycles:
        print(f'{cycles} module cycle(s)')
        return 1
    print(f'no module cycle ({total} module dependencies checked)')
    return 0

if __name__ == '__main__':
    sys.exit(main())
