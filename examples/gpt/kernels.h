/*
 * kernels.h: the CPU kernels of the example GPT (examples/gpt), forward and
 * backward, fp32.
 *
 * Pure functions over caller-owned arrays: no allocation, no threads, no
 * library calls beyond libm.  Every sum runs in one fixed order written in the
 * source (no -ffast-math, no OpenMP), so the same inputs give the same bits on
 * every run; that is what makes two training runs of one world size
 * bit-identical.  Backward functions ADD into their gradient outputs (dinp,
 * dw, db), so a caller zeroes what must start from zero.
 *
 * Shapes: N = B*T rows (tokens), C channels, OC output channels, NH heads,
 * hs = C/NH head size, V vocabulary.  Row-major, the last index fastest.
 * This file does not know about units, sharding or precision.
 */
#ifndef GPT_KERNELS_H
#define GPT_KERNELS_H

#include <stddef.h>

/* out (N, C) = wte[tok] + wpe[t] for each row n = b*T + t. */
void gpt_encoder_forward(float *out, const unsigned char *tok, const float *wte, const float *wpe,
                         size_t B, size_t T, size_t C);
/* dwte (V, C) and dwpe (T, C) += dout (N, C), rows in order. */
void gpt_encoder_backward(float *dwte, float *dwpe, const float *dout, const unsigned char *tok,
                          size_t B, size_t T, size_t C);

/* out (N, C) = (inp - mean) * rstd * w + b; mean, rstd (N) kept for backward. */
void gpt_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *b, size_t N, size_t C);
void gpt_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, const float *mean, const float *rstd, size_t N,
                            size_t C);

/* out (N, OC) = inp (N, C) @ w^T, w (OC, C), plus b (OC) when not NULL. */
void gpt_matmul_forward(float *out, const float *inp, const float *w, const float *b, size_t N,
                        size_t C, size_t OC);
/* dinp (N, C) += dout @ w; dw (OC, C) += dout^T @ inp; db (OC) += sum of dout
 * rows (skipped when NULL).  Each dw and db element sums over n in order. */
void gpt_matmul_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, size_t N, size_t C, size_t OC);

/* Causal self-attention.  qkv (B, T, 3C) holds q | k | v; att (B, NH, T, T)
 * keeps the softmax probabilities (row t uses columns 0..t); out (B, T, C). */
void gpt_attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T, size_t C,
                           size_t NH);
/* dqkv (B, T, 3C) += the gradient from dout (B, T, C); scratch holds T floats. */
void gpt_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                            float *scratch, size_t B, size_t T, size_t C, size_t NH);

/* GELU, tanh approximation.  Backward is the one kernel that SETS its
 * output: dinp = gelu'(inp) * dout, in place (dinp == dout) allowed. */
void gpt_gelu_forward(float *out, const float *inp, size_t n);
void gpt_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

/* out = a + b (n elements). */
void gpt_residual_forward(float *out, const float *a, const float *b, size_t n);

/* probs (N, V) = softmax(logits) (in place allowed); losses (N) = -log
 * probs[target].  Returns the sum of the losses, in double, rows in order. */
double gpt_crossentropy_forward(float *probs, float *losses, const float *logits,
                                const unsigned char *targets, size_t N, size_t V);
/* In place: probs (N, V) becomes dlogits = (probs - onehot(target)) * dloss,
 * the gradient of dloss * sum of the losses. */
void gpt_crossentropy_backward(float *probs, const unsigned char *targets, float dloss, size_t N,
                               size_t V);

/* Rounds each value to the nearest bf16 (ties to even), kept as fp32. */
void gpt_round_bf16(float *x, size_t n);

#endif
