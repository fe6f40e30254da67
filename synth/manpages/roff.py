"""Man pages (roff: the man(7) macros, and mdoc(7) in outline) rendered to plain text.

Our own small renderer rather than ``man``/``groff``: the text must not depend on which formatter
(and which line width, hyphenation and locale) a machine happens to have, and documents feed an
LLM and a phrase matcher, which want words, not layout. What is kept: the title line, section
headings, paragraphs, tagged lists, preformatted blocks and table cells; what is dropped: font
and size changes, macro definitions, conditionals, comments and formatter requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# \(xx and \[name] special characters that carry meaning in text (others are dropped)
_CHARS = {"aq": "'", "dq": '"', "em": "—", "en": "–", "hy": "-", "mi": "-", "bu": "•", "co": "©", "rg": "®",
          "lq": "“", "rq": "”", "oq": "‘", "cq": "’", "ga": "`", "ti": "~", "ha": "^", "rs": "\\", "sl": "/",
          "ba": "|", "br": "|", "lh": "<=", "rh": "=>", "<-": "<-", "->": "->", "<=": "<=", ">=": ">=", "!=": "!=",
          "mu": "×", "di": "÷", "pl": "+", "eq": "=", "de": "°", "tm": "™", "ua": "↑", "da": "↓", "aa": "´"}
_STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "Aq": "'", "dq": '"'}

_ESCAPE = re.compile(
    r"\\(?:f(?:\[[^\]]*\]|\(..|.)"  # font change
    r"|s[+-]?(?:\d|\(\d\d|\[\d+\])"  # size change
    r"|\((..)"  # \(xx
    r"|\[([^\]]*)\]"  # \[name]
    r"|\*(?:\((..)|\[([^\]]*)\]|(.))"  # string: \*(xx, \*[name], \*x
    r"|[nkgz](?:\(..|\[[^\]]*\]|.)"  # number register, mark, format, zero-width
    r"|[hvwlLbDoxXNRSu]'[^']*'"  # motions, widths, lines, overstrikes: dropped with their argument
    r"|(.))"  # one-character escapes
)
_ONE = {"-": "-", "e": "\\", "\\": "\\", "&": "", "|": "", "^": "", "~": " ", " ": " ", "0": " ", "c": "",
        "%": "", "t": " ", "'": "´", "`": "`", ".": ".", "/": "", ",": "", ":": "", "!": "", "{": "", "}": "",
        '"': ""}

# requests and macros that only change layout: their lines are dropped
_LAYOUT = set("ad na hy nh ne in ti ll ps vs ta tr cs ss mk rt PD ft fam hw lf cc ec eo rm rn als do pc nx rd em "
              "wh ch it tm ab ev fl pl pn po bp ce ul cu fc lc lt mc nm nn sv os ls RS RE DT UC IX ns rs "
              "Dd Os Bk Ek Ed Bf Ef El Pc Po Qc Qo Oc Oo Ec Eo Bc Bo Ac Ao Dc Do Sc So Xc Xo Fo Fc Ud Rs Re "
              "nr ds as so ie if el in hc cp".split())
# mdoc inline macros whose names are dropped, their arguments kept as text
_MDOC_INLINE = set("Nm Ar Cm Ic Ev Pa Va Vt Ft Fn Fa Li Em Sy Dv Er Ad An Lb Ms Mt Ux At Bx Ox Nx Fx Dx Bsx "
                   "Dq Sq Qq Pq Ql Aq Bq Brq Ns No Sx Tn Lk Xr Op Fl Oo Oc Nd It".split())


@dataclass
class ManPage:
    name: str
    section: str
    text: str
    see_also: list[tuple[str, str]] = field(default_factory=list)  # (name, section) the page refers to


def unescape(text: str, strings: dict[str, str] | None = None) -> str:
    """Text with roff escapes resolved; ``strings`` are the page's own ``.ds`` definitions."""
    def sub(m: re.Match) -> str:
        two, named, s2, sname, s1, one = m.groups()
        if two or named:
            return _CHARS.get(two or named, "")
        if s2 or sname or s1:
            key = s2 or sname or s1
            return (strings or {}).get(key, _STRINGS.get(key, ""))
        if one is not None:
            return _ONE.get(one, "")
        return ""

    return _ESCAPE.sub(sub, text)


def _args(rest: str) -> list[str]:
    """A macro line's arguments: blank-separated, double quotes group ("" is a quote inside)."""
    out, cur, quoted, i = [], "", False, 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest):  # an escape, e.g. "\ " (a space inside the argument)
            cur, i = cur + rest[i:i + 2], i + 2
            continue
        if c == '"':
            if quoted and rest[i + 1:i + 2] == '"':
                cur, i = cur + '"', i + 2
                continue
            quoted = not quoted
        elif c in " \t" and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur:
        out.append(cur)
    return out


def _mdoc(macro: str, args: list[str], name: str = "") -> str:
    if macro == "Nm" and not args:
        return name  # .Nm alone repeats the page's name
    if macro == "Xr" and len(args) >= 2:
        return _mdoc("", ["Xr"] + args, name)
    words, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "Fl" and i + 1 < len(args):
            words.append("-" + args[i + 1])
            i += 2
            continue
        if a == "Xr" and i + 2 < len(args):
            words.append(f"{args[i + 1]}({args[i + 2]})")
            i += 3
            continue
        if re.fullmatch(r"[,.;:)\]]+", a) and words:  # closing punctuation sticks to the word before it
            words[-1] += a
        elif a not in _MDOC_INLINE:
            words.append(a)
        i += 1
    if macro == "Fl":
        words = ["-" + w if k == 0 else w for k, w in enumerate(words)] or ["-"]
    text = " ".join(words)
    return {"Op": f"[{text}]", "Nd": f"- {text}"}.get(macro, text)


def render(source: str) -> ManPage:
    """Plain text of one man page, with its name/section (from .TH or .Dt) and SEE ALSO references."""
    lines = source.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    strings: dict[str, str] = {}
    name = section = ""
    skip_until = ""  # inside .de/.ig (until '..'), or a table's format lines (until one ending in '.')
    nofill = False
    para = brk = False  # a paragraph break (blank line) / a line break is pending
    tag = False  # the next text line is a .TP tag: the body starts on a line of its own

    def emit(text: str) -> None:
        nonlocal para, brk, tag
        if para and out and out[-1] != "":
            out.append("")
        if nofill or brk or para or not out or out[-1] == "":
            out.append(text)
        else:
            out[-1] += " " + text
        para = brk = False
        brk, tag = tag, False

    for raw in lines:
        if skip_until:
            if skip_until == ".." and raw.strip() == "..":
                skip_until = ""
            elif skip_until == "tbl" and raw.rstrip().endswith("."):
                skip_until, nofill = "", True  # the table's rows follow, one per line, until .TE
            continue
        if raw.startswith(('.\\"', "'\\\"", '.\\#')) or raw.strip() in (".", "'"):
            continue
        if raw[:1] in ".'":
            parts = raw[1:].strip().split(None, 1)
            macro, rest = (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")
            args = [unescape(a, strings) for a in _args(rest)]
            if macro == "ds" and rest.split():
                key, _, value = rest.partition(" ")
                strings[key] = unescape(value.lstrip().removeprefix('"'), strings)
            elif macro in ("de", "de1", "am", "ig"):
                skip_until = ".."
            elif macro == "TS":
                skip_until, para = "tbl", True
            elif macro in ("TH", "Dt"):
                name, section = (args + ["", ""])[:2]
                name = name.lower() if macro == "Dt" else name
                out.append(f"{name}({section})")
                para = True
            elif macro in ("SH", "Sh", "SS", "Ss"):
                heading = " ".join(args)
                out += ["", heading.upper() if macro in ("SH", "Sh") else heading]
                para = True
            elif macro in ("PP", "P", "LP", "sp", "Pp", "HP", "Bl"):
                para = True
            elif macro == "TE":
                nofill, para = False, True
            elif macro == "br":
                brk = True
            elif macro in ("nf", "EX", "Bd"):
                nofill, para = True, True
            elif macro in ("fi", "EE", "Ed"):
                nofill, para = False, True
            elif macro == "TP":  # the next line is the tag, the lines after it the body
                para = tag = True
            elif macro == "TQ":
                brk = True
            elif macro in ("IP", "It"):
                para = True
                text = _mdoc(macro, args, name) if macro == "It" else (args[0] if args else "")
                if text:  # the item's tag; its body follows on the same line
                    emit(text)
            elif macro in ("B", "I", "SM", "SB", "UR", "MT", "OP"):
                if args:
                    emit(" ".join(args) if macro != "OP" else "[" + " ".join(args) + "]")
            elif macro in ("BR", "IR", "RB", "RI", "BI", "IB"):
                emit("".join(args))
            elif macro in ("UE", "ME"):
                if args:
                    emit("".join(args))
            elif macro in _LAYOUT or not macro:
                continue
            elif macro[:1].isupper() and len(macro) == 2:  # an mdoc macro: its words as text
                text = _mdoc(macro, args, name)
                if text:
                    emit(text)
            continue
        text = unescape(raw.replace("\t", " "), strings)
        if not nofill:
            text = text.strip()
            if not text:
                para = True
                continue
        emit(text)
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return ManPage(name, section, text, see_also(text))


def see_also(text: str) -> list[tuple[str, str]]:
    """``name(section)`` references in the SEE ALSO section, in order, without repeats."""
    m = re.search(r"^SEE ALSO\s*$(.*?)(?=^[A-Z][A-Z /-]+\s*$|\Z)", text, re.MULTILINE | re.DOTALL)
    refs: list[tuple[str, str]] = []
    for name, sec in re.findall(r"([A-Za-z0-9_.:+-]+)\s?\(([1-9][a-z0-9]*)\)", m.group(1) if m else ""):
        if (name, sec) not in refs:
            refs.append((name, sec))
    return refs
