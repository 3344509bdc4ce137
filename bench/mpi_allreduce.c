/*
 * bench/mpi_allreduce.c: the Open MPI peer of bench/comm.c, built by
 * bench/comm.sh with mpicc (the Makefile leaves bench/mpi_*.c alone).
 *
 *   mpirun -np N mpi_allreduce OP MIN MAX
 *
 * The same measurement as bench/comm.c: fp32, sizes MIN to MAX (x4), the same
 * warm-up, a barrier, the mean of the same number of back-to-back
 * iterations, the slowest rank's time; rank 0 prints "op ranks bytes
 * time_us".  OP: all_reduce (MPI_Allreduce, MPI_SUM), all_gather
 * (MPI_Allgather), reduce_scatter (MPI_Reduce_scatter_block, MPI_SUM).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters_for(size_t bytes)
{
    size_t n = (512u << 20) / bytes;
    return n < 3 ? 3 : n > 200 ? 200 : (int)n;
}

static void run_op(const char *op, float *send, float *recv, size_t bytes, int n)
{
    int count = (int)(bytes / 4);

    if (strcmp(op, "all_reduce") == 0)
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (strcmp(op, "all_gather") == 0)
        MPI_Allgather(send, count / n, MPI_FLOAT, recv, count / n, MPI_FLOAT, MPI_COMM_WORLD);
    else
        MPI_Reduce_scatter_block(send, recv, count / n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    const char *op;
    size_t min, max;
    float *send, *recv;
    int rank, n;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_allreduce OP MIN MAX\n");
        MPI_Finalize();
        return 2;
    }
    op = argv[1];
    min = strtoull(argv[2], NULL, 0);
    max = strtoull(argv[3], NULL, 0);
    send = malloc(max);
    recv = malloc(max);
    if (send == NULL || recv == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < max / 4; i++)
        send[i] = recv[i] = 1.0f;
    for (size_t bytes = min; bytes <= max; bytes *= 4) {
        int iters = iters_for(bytes), warm = bytes < (1u << 20) ? 5 : 1;
        double t0, t, worst;

        for (int i = 0; i < warm; i++)
            run_op(op, send, recv, bytes, n);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            run_op(op, send, recv, bytes, n);
        t = (MPI_Wtime() - t0) / iters;
        MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%s %d %zu %.1f\n", op, n, bytes, worst * 1e6);
            fflush(stdout);
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
