#!/usr/bin/env python3
"""check-includes.py - docs/ARCHITECTURE.md tells the truth about layering.

Every quoted #include in every .c and .h file under src/ reaches a
component (the first path segment: "store/store.h" reaches `store`; a
name without a slash is a file of the includer's own directory). Each
edge from one component to another must be allowed by the "may use"
column of the table under "## Components and what each may use":
component NAME is allowed when NAME appears in that cell as a whole word,
outside parenthetical remarks ("(starts supervisors; never calls the
runtime)" allows nothing). `base/banned.h` is force-included everywhere
and may be included by anyone.

Also an error: a directory of src/ without a row, a row without a
directory, a table that cannot be found or has fewer than 5 rows.

Usage: check-includes.py [ROOT]     exit 0 when clean, 1 with a report
       check-includes.py --self-test
"""

import os
import re
import subprocess
import sys
import tempfile

HEADING = "## Components and what each may use"
MIN_ROWS = 5
ALWAYS_ALLOWED = {"base/banned.h"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ROW_COMPONENT_RE = re.compile(r"^`src/([A-Za-z0-9_-]+)/?`$")


def split_row(line):
    """Cells of a markdown table row; a backslash-escaped pipe is text."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]


def strip_parentheticals(text):
    """Text without (...) remarks, nested ones included."""
    prev = None
    while prev != text:
        prev = text
        text = re.sub(r"\([^()]*\)", " ", text)
    return text


def parse_table(doc_path, errors):
    """{component: may-use cell} from the table, or None (errors filled)."""
    try:
        with open(doc_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        errors.append(f"{doc_path}: cannot read: {e.strerror}")
        return None
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == HEADING)
    except StopIteration:
        errors.append(f'{doc_path}: no heading "{HEADING}"')
        return None

    i = start + 1
    while i < len(lines) and not lines[i].startswith("## ") \
            and not lines[i].lstrip().startswith("|"):
        i += 1
    if i >= len(lines) or not lines[i].lstrip().startswith("|"):
        errors.append(f'{doc_path}: no table under "{HEADING}"')
        return None

    header = [c.lower() for c in split_row(lines[i])]
    if "may use" not in header:
        errors.append(f'{doc_path}:{i + 1}: the table has no "may use" column')
        return None
    col = header.index("may use")
    i += 1
    if i < len(lines) and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", lines[i]):
        i += 1  # the |---|---| line

    rows = {}
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        cells = split_row(lines[i])
        m = ROW_COMPONENT_RE.match(cells[0]) if cells else None
        if not m:
            errors.append(f"{doc_path}:{i + 1}: first cell {cells[0]!r} "
                          "is not `src/NAME/`")
        elif len(cells) <= col:
            errors.append(f"{doc_path}:{i + 1}: row has no \"may use\" cell")
        elif m.group(1) in rows:
            errors.append(f"{doc_path}:{i + 1}: second row for "
                          f"src/{m.group(1)}/")
        else:
            rows[m.group(1)] = (cells[col], i + 1)
        i += 1

    if len(rows) < MIN_ROWS:
        errors.append(f'{doc_path}: the table under "{HEADING}" has '
                      f"{len(rows)} rows, fewer than {MIN_ROWS}")
        return None
    return rows


def allowed_components(cell, components):
    text = strip_parentheticals(cell)
    return {c for c in components
            if re.search(r"(?<![A-Za-z0-9_-])" + re.escape(c) +
                         r"(?![A-Za-z0-9_-])", text)}


def reached_component(include, file_rel):
    """Component an include reaches, given the includer's path under src/."""
    if "/" not in include:
        return file_rel.split("/")[0]  # a file of its own directory
    if include.startswith("./") or include.startswith("../"):
        target = os.path.normpath(
            os.path.join(os.path.dirname(file_rel), include))
        return target.split(os.sep)[0]
    return include.split("/")[0]


def check(root):
    errors = []
    src = os.path.join(root, "src")
    doc = os.path.join(root, "docs", "ARCHITECTURE.md")
    doc_rel = os.path.relpath(doc, root)

    rows = parse_table(doc, errors)
    if not os.path.isdir(src):
        errors.append(f"{src}: no such directory")
        return errors
    if rows is None:
        return errors

    components = sorted(d for d in os.listdir(src)
                        if os.path.isdir(os.path.join(src, d)))
    for c in components:
        if c not in rows:
            errors.append(f"{doc_rel}: src/{c}/ exists but has no row in "
                          f'the table "{HEADING}"')
    for c, (_, line) in sorted(rows.items()):
        if c not in components:
            errors.append(f"{doc_rel}:{line}: row for src/{c}/ but there "
                          "is no such directory")

    known = set(components) | set(rows)
    allowed = {c: allowed_components(cell, known)
               for c, (cell, _) in rows.items()}

    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            own = rel.split("/")[0]
            if "/" not in rel:
                errors.append(f"src/{rel}: a source file outside any "
                              "component directory")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, text in enumerate(f, 1):
                    m = INCLUDE_RE.match(text)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc in ALWAYS_ALLOWED:
                        continue
                    to = reached_component(inc, rel)
                    if to == own:
                        continue
                    where = f"src/{rel}:{lineno}"
                    if to not in known:
                        errors.append(f'{where}: #include "{inc}" reaches '
                                      f"no component ({to!r} is not a "
                                      "directory of src/)")
                    elif own not in rows:
                        continue  # already reported: no row
                    elif to not in allowed[own]:
                        may = ", ".join(sorted(allowed[own])) or "none"
                        errors.append(
                            f'{where}: {own} -> {to} (#include "{inc}"); '
                            f"{own} may use: {rows[own][0]} "
                            f"[components: {may}]")
    return errors


def main_check(root):
    errors = check(root)
    if errors:
        print(f"layering: {len(errors)} problem(s) against "
              "docs/ARCHITECTURE.md:")
        for e in errors:
            print("  " + e)
        return 1
    print("layering: every include is allowed by docs/ARCHITECTURE.md")
    return 0


# --- self-test ---------------------------------------------------------

FIXTURE_DOC = """\
# Architecture

## Components and what each may use

| component | what it is | may use |
|---|---|---|
| `src/base/` | helpers, and `banned.h` | libc |
| `src/core/` | the model | base |
| `src/store/` | storage | core, base, SQLite |
| `src/api/` | the API | store, core, base (never calls the runtime) |
| `src/runtime/` | isolation | base |

## Next section
"""

FIXTURE_SRC = {
    "base/banned.h": "#pragma once\n",
    "base/error.h": "#pragma once\n#include <stdio.h>\n",
    "core/task.h": '#include "base/error.h"\n',
    "store/store.c": '#include "store/store.h"\n#include "core/task.h"\n',
    "store/store.h": '#include "local.h"\n',
    "runtime/spec.c": '#include "base/error.h"\n#include "base/banned.h"\n',
    "api/api.c": ('#include "store/store.h"\n'
                  '#include <runtime/spec.h>\n'
                  '#include "base/banned.h"\n'
                  "FORBIDDEN\n"),
}
FORBIDDEN = '#include "runtime/spec.h"\n'


def write_tree(root, doc, files):
    os.makedirs(os.path.join(root, "docs"), exist_ok=True)
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), "w") as f:
        f.write(doc)
    for rel, text in files.items():
        path = os.path.join(root, "src", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def run_on(root):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), root],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode, p.stdout


def self_test():
    failures = []

    def expect(what, root, rc_wanted, must=(), must_not=()):
        rc, out = run_on(root)
        ok = rc == rc_wanted and all(s in out for s in must) \
            and not any(s in out for s in must_not)
        print(f"{'ok  ' if ok else 'FAIL'} {what} (exit {rc})")
        if not ok:
            failures.append(what)
            print("     output: " + out.replace("\n", "\n     "))

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        files = dict(FIXTURE_SRC)
        files["api/api.c"] = files["api/api.c"].replace("FORBIDDEN\n",
                                                        FORBIDDEN)
        write_tree(root, FIXTURE_DOC, files)
        expect("a forbidden include fails and names its edge", root, 1,
               must=("src/api/api.c:4: api -> runtime",
                     "store, core, base (never calls the runtime)"),
               must_not=("banned.h", "api.c:2", "store -> core"))

        files["api/api.c"] = files["api/api.c"].replace(FORBIDDEN, "")
        write_tree(root, FIXTURE_DOC, files)
        expect("without it the tree is clean", root, 0)

        os.makedirs(os.path.join(root, "src", "extra"))
        expect("a directory without a row fails", root, 1,
               must=("src/extra/ exists but has no row",))
        os.rmdir(os.path.join(root, "src", "extra"))

        write_tree(root, FIXTURE_DOC.replace(
            "| `src/api/`", "| `src/gone/` | x | base |\n| `src/api/`"), {})
        expect("a row without a directory fails", root, 1,
               must=("row for src/gone/ but there is no such directory",))

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        short = "\n".join(l for l in FIXTURE_DOC.splitlines()
                          if "`src/runtime/`" not in l
                          and "`src/api/`" not in l) + "\n"
        write_tree(root, short, {"base/error.h": "\n", "core/task.h": "\n",
                                 "store/store.h": "\n"})
        expect("a table of fewer than 5 rows fails", root, 1,
               must=("fewer than 5",))

        write_tree(root, FIXTURE_DOC.replace("## Components", "## Parts"),
                   {})
        expect("a missing table fails", root, 1, must=("no heading",))

    if failures:
        print(f"self-test: {len(failures)} failure(s)")
        return 1
    print("self-test: all passed")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    if len(argv) > 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")
    return main_check(os.path.normpath(root))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
