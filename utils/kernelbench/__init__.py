"""The four KernelBench level-2 reference problems, verbatim.

Each module below reproduces one KernelBench file exactly (class body, parameter
names and creation order, module-level sizes, get_inputs, get_init_inputs): the
drop-in contract is defined against these. Do not edit them; utils.problems adds
the workbook's extra shapes on top without touching them.
"""
