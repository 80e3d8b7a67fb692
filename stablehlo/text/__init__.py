"""StableHLO text: MLIR's pretty and generic syntax, parsed and printed.

    module = parse_module(text, "file.mlir")    # ParseError "file:line:col: error: ..."
    text = print_module(module)                 # MLIR's canonical pretty form
    text = print_module(module, generic=True)   # generic form
    chunks = split_input_file(text)             # [(index, first line, chunk)] at "// -----"
"""
from stablehlo.errors import ParseError
from stablehlo.text.parser import parse_attribute, parse_module, parse_type
from stablehlo.text.printer import print_attribute, print_module, print_op, print_type
from stablehlo.text.split import split_input_file

__all__ = [
           "ParseError",
           "parse_attribute",
           "parse_module",
           "parse_type",
           "print_attribute",
           "print_module",
           "print_op",
           "print_type",
           "split_input_file",
]
