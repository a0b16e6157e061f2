/*
 * examples/llama/layout.h — llama.cpp's sequence state, laid out token-major and back.
 *
 * llama_state_seq_get_data writes (one stream, flash attention, this example's single sequence):
 *   u32 magic, i32 seq_id = 0 (llama_context::state_seq_get_data),
 *   u32 n_stream = 1, u32 cell_count = n,
 *   n x { i32 pos, u32 n_seq_id = 1, i32 seq_id },
 *   u32 v_trans = 0, u32 n_layer = L,
 *   L x { i32 k_type, u64 k_row, n x k_row bytes },  L x { i32 v_type, u64 v_row, n x v_row bytes }
 * (llama_kv_cache::state_write). A prefix of P + 256 tokens shares no aligned run of bytes with the
 * prefix of P tokens: every layer's rows move. The token-major form is a permutation of the same
 * bytes: for each block of B tokens, its cells' metadata then its K rows of every layer then its V
 * rows of every layer; then the header (magic, seq_id, n_stream, n, v_trans, the layers' types
 * and row sizes, L last). Blocks of the same tokens are the same bytes in every prefix that contains them, so
 * content-addressed segments (docs/DESIGN.md) store them once.
 */
#ifndef SC_EXAMPLES_LLAMA_LAYOUT_H
#define SC_EXAMPLES_LLAMA_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* @in (llama.cpp's form, @len bytes) into @out (token-major, @len bytes). 0, or -1 when @in is not
 * the form above (another engine configuration: more streams or sequences, transposed V, cell
 * extensions, positions other than 0..n-1). */
int layout_to_tokens(const uint8_t *in, size_t len, uint32_t block, uint8_t *out);
/* The inverse. 0, or -1 when @in is not a token-major state of @len bytes. */
int layout_from_tokens(const uint8_t *in, size_t len, uint32_t block, uint8_t *out);

#endif
