#!/bin/sh
# bench/topo_sim.sh: runs the topology simulator (bench/topo_sim.c), prints its
# table, and draws build/bench/topo-crossings.png: ring crossings against
# cluster size (log x, log y), one panel per cluster and naming, three lines
# each: accelrun's order, Slurm's default order, the lower bound.  Any
# argument after the binary goes to the simulator (--runs, --leaf, --busy...).
# Exit status: the simulator's (1 when accelrun is more than 1% above the
# bound anywhere).
set -u
bin=${1:-build/bench/topo_sim}
[ $# -gt 0 ] && shift
out=build/bench
dat=$out/topo-crossings.dat
png=$out/topo-crossings.png

if [ ! -x "$bin" ]; then
    echo "topo_sim.sh: $bin is missing; build it with 'make $bin'" >&2
    exit 1
fi
mkdir -p "$out"
rc=0
"$bin" --dat "$dat" "$@" || rc=$?
[ -s "$dat" ] || exit 1

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "topo_sim.sh: picture: SKIP: gnuplot is not installed (apt-get install gnuplot-nox)"
    exit $rc
fi
# Columns of the .dat: 1 gpus, 4 accelrun, 5 slurm, 6 bound crossings.
# Crossings of 0 (one leaf) have no place on a log axis and are left out.
gnuplot <<EOF
set terminal pngcairo size 1500,900 font "DejaVu Sans,11"
set output "$png"
set multiplot layout 2,3 title "Ring edges crossing a leaf switch (rail: rail switch, x 8 rails) - random half of a cluster, 8 GPUs/node" font ",14"
set logscale xy
set xrange [64:200000]
set yrange [1:500000]
set format x "%.0s%c"
set format y "%.0s%c"
set xtics (128, 512, "2k" 2048, "8k" 8192, "32k" 32768, "128k" 131072)
set xlabel "GPUs in the job"
set ylabel "crossings"
set grid
set key top left
nz(c) = (column(c) > 0 ? column(c) : NaN)
# Panels row by row: names in rack order (data indexes 0, 2, 4), then
# shuffled (1, 3, 5); columns fat-tree-2, fat-tree-3, rail.
array cluster[3] = ["fat-tree, 2 levels", "fat-tree, 3 levels", "rail-optimised"]
array naming[2] = ["names in rack order", "names shuffled against racks"]
do for [p=0:5] {
    i = (p % 3) * 2 + p / 3
    set title sprintf("%s - %s", cluster[p % 3 + 1], naming[p / 3 + 1])
    plot "$dat" index i using 1:(nz(5)) with linespoints lw 2 pt 6 ps 1.4 lc rgb "#d62728" title "Slurm order", \\
         "" index i using 1:(nz(6)) with lines lw 6 lc rgb "#bbbbbb" title "lower bound", \\
         "" index i using 1:(nz(4)) with linespoints lw 2 pt 7 ps 0.9 lc rgb "#1f77b4" title "accelrun"
}
unset multiplot
EOF
echo "topo_sim.sh: wrote $png (data: $dat)"
exit $rc
