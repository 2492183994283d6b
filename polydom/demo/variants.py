"""The classifier variants the demo fits and compares, and how a user asks for each."""

__all__ = ["DEFAULT", "BACKENDS", "SETTINGS_CODE"]

#: The default classifier's name in the demo.
DEFAULT = "PolyDom"
#: The variants the demo fits, by name: each policy group's changes from the defaults. The
#: first is the default classifier; every PolyDom variant is also served for real.
BACKENDS = {
    DEFAULT: {},
    "PolyDom, 2% late": {"serving": {"late_share": 0.02}},
    "PolyDom, 1% late": {"serving": {"late_share": 0.01}},
    "Greedy": {"selection": {"backend": "greedy"}},
}
#: How the report tells a user to ask for each variant.
SETTINGS_CODE = {
    DEFAULT: "the defaults",
    "PolyDom, 2% late": "`serving=polydom.Serving(late_share=0.02)` (a server's late-share budget)",
    "PolyDom, 1% late": "`serving=polydom.Serving(late_share=0.01)`",
    "Greedy": '`selection=polydom.Selection(backend="greedy")`',
}
