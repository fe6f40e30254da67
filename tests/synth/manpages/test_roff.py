"""roff.render on man(7) and mdoc(7) sources: headings, paragraphs, tagged lists, fonts, strings,
special characters, preformatted blocks, tables, and the SEE ALSO references that become links."""

from __future__ import annotations

from synth.manpages.roff import render, see_also, unescape

MAN = r""".\" a comment that must not show
.de XX
.  this macro body is never text
..
.ds Pr \fIprog\fP
.TH PROG 1 "2024" "prog 2.0" "User Commands"
.SH NAME
prog \- convert \(lqthings\(rq to other things
.SH SYNOPSIS
.nf
prog [\-v] FILE...
     [\-\-out=DIR]
.fi
.SH DESCRIPTION
\*(Pr reads each
.B FILE
and writes it
.BR again ,
twice.
.PP
A second paragraph with \e backslash and a \(em dash.
.TP
.B \-v
be verbose
.IP \(bu 2
an item
.TP
.RI r\  filename
append a file
.TS
tab(;);
l l.
key;value
.TE
.SH "SEE ALSO"
.BR sed (1),
.BR regex (7),
prog.conf(5), sed(1)
"""

MDOC = r""".Dd March 1, 2020
.Dt TOOL 8
.Os
.Sh NAME
.Nm tool
.Nd do a thing
.Sh SYNOPSIS
.Nm
.Op Fl a
.Ar file
.Sh SEE ALSO
.Xr ssh 1 ,
.Xr sshd_config 5
"""


def test_man_macros_render_to_plain_text():
    page = render(MAN)
    assert (page.name, page.section) == ("PROG", "1")
    lines = page.text.splitlines()
    assert lines[0] == "PROG(1)" and "NAME" in lines and "SEE ALSO" in lines
    assert "prog - convert “things” to other things" in lines
    # no-fill keeps the synopsis' own lines; fill joins text lines into one paragraph
    assert "prog [-v] FILE..." in lines and "     [--out=DIR]" in lines
    assert "prog reads each FILE and writes it again, twice." in lines
    assert "A second paragraph with \\ backslash and a — dash." in lines
    assert "-v" in lines and "be verbose" in lines and "• an item" in lines
    assert "r filename" in lines  # an escaped space stays inside its macro argument
    assert "key;value" in lines and "tab(;);" not in page.text  # table cells kept, its format lines not
    assert "comment" not in page.text and "macro body" not in page.text and "\\f" not in page.text
    assert page.see_also == [("sed", "1"), ("regex", "7"), ("prog.conf", "5")]


def test_mdoc_outline():
    page = render(MDOC)
    assert (page.name, page.section) == ("tool", "8")
    lines = page.text.splitlines()
    assert lines[0] == "tool(8)" and "tool - do a thing" in lines and "tool [-a] file" in lines
    assert "ssh(1), sshd_config(5)" in lines
    assert page.see_also == [("ssh", "1"), ("sshd_config", "5")]


def test_escapes_and_see_also_bounds():
    assert unescape(r"\fBbold\fR \f(CWmono\fP \s-1small\s0 \[em] \(co \*(lqq\*(rq \&. \~x") == \
        "bold mono small — © “q” .  x"
    assert unescape(r"\*(Xy left", {"Xy": "defined"}) == "defined left"
    # only the SEE ALSO section counts, up to the next heading
    text = "NAME\n\nls(1) is mentioned here\n\nSEE ALSO\n\ncp(1), mv(1)\n\nBUGS\n\nrm(1)\n"
    assert see_also(text) == [("cp", "1"), ("mv", "1")]
    assert see_also("NAME\n\nno references\n") == []
