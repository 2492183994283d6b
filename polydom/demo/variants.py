"""The classifier variants the demo fits and compares, and how a user asks for each."""

__all__ = ["DEFAULT", "BACKENDS", "SETTINGS_CODE"]

#: The default classifier's name in the demo.
DEFAULT = "PolyDom"
#: The variants the demo fits, by name: each policy group's changes from the defaults. The
#: first is the default classifier; every PolyDom variant is also served for real.
BACKENDS = {
    DEFAULT: {},
    "PolyDom, 2% late": {"serving": {"guard": 0.98}},
    "PolyDom, 1% late": {"serving": {"guard": 0.99}},
    "Greedy": {"selection": {"backend": "greedy"}},
}
#: How the report tells a user to ask for each variant.
SETTINGS_CODE = {
    DEFAULT: "the defaults",
    "PolyDom, 2% late": "`serving=polydom.Serving(guard=0.98)`",
    "PolyDom, 1% late": "`serving=polydom.Serving(guard=0.99)`",
    "Greedy": '`selection=polydom.Selection(backend="greedy")`',
}
