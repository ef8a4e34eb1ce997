#!/usr/bin/env python3
"""Module import cycles in a crate, from its `use crate::…`/`use super::…`
lines and `crate::a::b` paths in code (cfg(test) modules excluded).

usage: tools/modcycles.py crates/NAME/src [...]
Prints each strongly connected set of modules that import each other.
"""
import os, re, sys

def modname(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)

def strip_tests(text):
    # drop `#[cfg(test)] mod x { ... }` blocks (brace matched)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)

def resolve(mods, base, parts):
    # longest prefix of parts naming a module
    for n in range(len(parts), 0, -1):
        if tuple(base) + tuple(parts[:n]) in mods:
            return tuple(base) + tuple(parts[:n])
    return None

def edges(src):
    files = {}
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                files[modname(src, p)] = p
    mods = set(files)
    g = {m: set() for m in mods}
    for m, p in files.items():
        text = strip_tests(open(p).read())
        text = re.sub(r"//.*", "", text)
        is_dir = os.path.basename(p) in ("mod.rs", "lib.rs", "main.rs")
        parent = m if is_dir else m[:-1]
        for path in re.findall(r"\b((?:crate|super)(?:::\w+)+)", text):
            parts = path.split("::")
            base = ()
            if parts[0] == "super":
                # each `super` is one level above the module itself
                nsup = 0
                while parts and parts[0] == "super":
                    nsup += 1
                    parts = parts[1:]
                base = m[: max(0, len(m) - nsup)]
            else:
                parts = parts[1:]
            t = resolve(mods, base, parts)
            if t is not None and t != m and not (len(t) < len(m) and m[: len(t)] == t and not parts):
                g[m].add(t)
        # `use child::…` (a path relative to this module, 2018 edition)
        for child in re.findall(r"\buse\s+(\w+)::", text):
            t = m + (child,) if is_dir else None
            if t in mods:
                g[m].add(t)
    return g

def sccs(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in g[v]:
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
                out.append(comp)
    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return out

bad = 0
for src in sys.argv[1:]:
    g = edges(src)
    name = lambda m: "::".join(m) or "(root)"
    cycles = sccs(g)
    nedges = sum(len(v) for v in g.values())
    print(f"{src}: {len(g)} modules, {nedges} edges, {len(cycles)} cycle(s)")
    for c in cycles:
        bad += 1
        cs = set(c)
        print("  cycle:", ", ".join(sorted(name(m) for m in c)))
        for m in sorted(c):
            print("    ", name(m), "->", ", ".join(sorted(name(t) for t in g[m] if t in cs)))
sys.exit(1 if bad else 0)
