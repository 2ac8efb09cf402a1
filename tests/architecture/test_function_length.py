"""No function in tools/report/ is longer than 80 lines.

The report is read and changed one view at a time (docs/report.md): a function that grows past a
screen and a half is a view or a section that wants a name of its own. A function's length is
counted in source lines from its signature's first line to its closing brace, blank and comment
lines included. The bodies are found by a small brace matcher (comments, strings and character
literals skipped) that takes a `{` at namespace or class scope after a parenthesised parameter
list as a function's body; lambdas and nested blocks count toward the function they are in.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80
CHECKED = ROOT / "tools" / "report"


class Function(NamedTuple):
    name: str
    first_line: int
    last_line: int

    @property
    def lines(self) -> int:
        return self.last_line - self.first_line + 1


def blank_out(source: str) -> str:
    """The source with comments, string and character literals replaced by spaces (newlines kept)."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c == "R" and source.startswith('R"', i) and (i == 0 or not source[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', source[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = source.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
        elif c in "\"'":
            if c == "'" and i > 0 and source[i - 1].isalnum() and source[i + 1:i + 2].isdigit():
                out.append(c)  # a digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append("".join(ch if ch == "\n" else " " for ch in source[i:j]))
        i = j
    return "".join(out)


SCOPE_KEYWORD = re.compile(r"\b(namespace|class|struct|union|enum)\b")
# What may stand between a parameter list's ")" and a body's "{": qualifiers, a trailing return
# type, a constructor's initializer list.
FUNCTION_HEAD = re.compile(r"\)\s*(const|noexcept|override|final|mutable|&|&&|->[^;{}]*|\s)*$")
CTOR_INIT = re.compile(r"\)\s*(noexcept\s*)?:([^;{}]|\{[^{}]*\})*$")


def functions(source: str) -> list[Function]:
    """The function bodies at namespace or class scope of one C++ source."""
    text = blank_out(source)
    found: list[Function] = []
    # Each open brace: (kind, name, first line) with kind "scope", "function", "block" (inside a
    # function) or "init" (a brace initializer at namespace or class scope).
    stack: list[tuple[str, str, int]] = []
    head_start = 0
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        if c not in "{};":
            continue
        in_function = any(kind == "function" for kind, _, _ in stack)
        head = text[head_start:i]
        if c == ";":
            if not in_function:
                head_start = i + 1
            continue
        if c == "}":
            kind, name, first = stack.pop() if stack else ("block", "", line)
            if kind == "function":
                found.append(Function(name, first, line))
            if (not in_function and kind != "init") or kind == "function":
                head_start = i + 1
            continue
        # "{"
        if in_function:
            stack.append(("block", "", line))
            continue
        stripped = head.strip()
        if re.search(r"[=,({]\s*$", stripped) or (re.search(r"\w\s*$", stripped) and CTOR_INIT.search(stripped)):
            stack.append(("init", "", line))  # an initializer: the head goes on past it
            continue
        if "(" in stripped and not SCOPE_KEYWORD.match(stripped) and (
                FUNCTION_HEAD.search(stripped) or CTOR_INIT.search(stripped)):
            init = CTOR_INIT.search(stripped)
            signature = stripped[: init.start() + 1] if init else stripped
            name_match = re.search(r"([~\w:<>]+)\s*\([^()]*(\([^()]*\)[^()]*)*\)[^()]*$", signature)
            name = name_match.group(1) if name_match else signature.split("(")[0].split()[-1]
            first = line - text[head_start + len(head) - len(head.lstrip()):i].count("\n")
            stack.append(("function", name, first))
        else:
            stack.append(("scope", "", line))
        head_start = i + 1
    return found


def long_functions(root: Path) -> list[str]:
    out = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in {".cpp", ".h"}):
        for f in functions(path.read_text()):
            if f.lines > LIMIT:
                out.append(f"{path.relative_to(ROOT)}:{f.first_line}: {f.name} is {f.lines} lines "
                           f"(at most {LIMIT}): split it into named steps")
    return out


def test_the_matcher_finds_functions_methods_and_constructors() -> None:
    source = """
namespace a {
// a comment { with a brace
int f(int x) {
  const char* s = "}";
  auto g = [](int y) { return y; };
  if (x) {
    return g(x);
  }
  return '}';
}
struct S {
  S(int v) : v_(v), w_{v} {}
  int get() const { return v_; }
  int v_, w_;
};
std::vector<int> table = {1, 2, 3};
auto S::run() -> int {
  return R"(})"[0];
}
}  // namespace a
"""
    got = {f.name: f.lines for f in functions(source)}
    assert got == {"f": 8, "S": 1, "get": 1, "S::run": 3}


def test_a_long_function_is_found() -> None:
    body = "\n".join(f"  x += {i};" for i in range(LIMIT))
    (found,) = functions(f"void long_one(int& x) {{\n{body}\n}}\n")
    assert found.name == "long_one" and found.lines == LIMIT + 2


def test_no_function_in_the_report_is_over_80_lines() -> None:
    problems = long_functions(CHECKED)
    assert not problems, "\n".join(problems)
