#!/usr/bin/env python3
"""cu2cpp.py (tests/examples/cuda_emu): rewrites a .cu file as plain C++ for
the CPU emulator of cuda_runtime.h, on stdout.  The one change: each launch

    kernel<<<grid, block[, shared, stream]>>>(args);

becomes

    emu_launch(dim3(grid), dim3(block), [&] { kernel(args); });

keeping the line count (a #line directive names the .cu file, so compiler
messages point into it).  The dynamic shared memory size and the stream are
dropped: the examples' kernels use neither dynamic shared memory nor more
than one stream."""
import re
import sys


def split_top(s):
    """Splits s at the commas outside parentheses."""
    out, depth, cur = [], 0, ''
    for ch in s:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    out.append(cur.strip())
    return out


def main():
    src = open(sys.argv[1]).read()
    launch = re.compile(r'(\w+)\s*<<<(.*?)>>>\s*\(', re.S)
    res, pos = [], 0
    for m in launch.finditer(src):
        i, depth = m.end(), 1  # the end of the argument list
        while depth:
            depth += (src[i] == '(') - (src[i] == ')')
            i += 1
        args = src[m.end():i - 1]
        cfg = split_top(m.group(2))
        call = 'emu_launch(dim3(%s), dim3(%s), [&] { %s(%s); })' % (
            cfg[0], cfg[1], m.group(1), ' '.join(args.split()))
        call += '\n' * src[m.start():i].count('\n')
        res.append(src[pos:m.start()] + call)
        pos = i
    res.append(src[pos:])
    sys.stdout.write('#line 1 "%s"\n' % sys.argv[1] + ''.join(res))


main()
