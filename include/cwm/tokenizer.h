/* tokenizer.h: the world model's tokenizer of printed program states (cwm_state_print text)
 * and its vocabulary. Depends only on util.h.
 *
 * The text is read line by line. Each non-blank line opens with a depth token <d:N> (N =
 * leading spaces / 2, a tab counting two spaces, capped at 63), so every window the encoder
 * cuts from the token stream still knows how deep each statement sits. Then, left to right:
 *
 *   integers     n -> a size bucket, then its decimal digits as written:
 *                  <n:0> and <n:1> alone (no digits) for 0 and 1;
 *                  <n:bK> <#d>... for n >= 2, K = round(log2 n) (so 1023, 1024 and 1025 all
 *                  fall in <n:b10> and differ in one digit token);
 *                  <n:big> <#d>... beyond 2^62 or 19 digits.
 *   floats       (a literal with '.' or an exponent) -> <f:bK> with K = round(log2 |v|) clamped
 *                to [-32, 32], then its first three significant digits; <f:0>, <f:inf>.
 *   iterators    canonical by the order in which their base names first occur in the text:
 *                i.0.1 -> <ax:0> .0 .1, a fused k.0@j -> <ax:1> .0 @ <ax:2>. The split suffixes
 *                stay (loops of one original axis stay recognisable); axis 64 and later are
 *                <ax:many>. Renaming the axes consistently leaves the ids unchanged.
 *   tensors      canonical the same way: <t:0>, <t:1> ... (<t:many> from 32), a suffix such as
 *                .local or .rf kept as its own token (var.rf -> <t:3> .rf, var -> <t:3>).
 *                Tensor names are the workload author's choice (user workloads bring names
 *                no training text had), so they carry no meaning the structure does not.
 *   words        keywords (placeholder allocate const for parallel vectorize unroll pragma if
 *                auto_unroll), function names (exp tanh max ...), pragma names
 *                (auto_unroll_max_step), inf/nan: the word itself.
 *   operators    ( ) [ ] , : = += max= min= * + - / % < <= > >= == != && || ! ? and any other
 *                printable ASCII punctuation: the characters themselves.
 *
 * Which name is which comes from its place: the word after a loop keyword is an iterator, the
 * word after placeholder/allocate or one followed by '[' is a tensor, a word followed by '('
 * is a function, the first word of a line is a keyword; any other word is an iterator (a word
 * already known as an iterator stays one, so an axis named "inf" is still an axis).
 * Bytes outside printable ASCII, and words longer than CWM_TOKEN_MAX, become <unk>.
 *
 * Vocabulary: <pad>=0, <unk>=1, then the fixed tokens of the closed classes above (depths,
 * number buckets, digits, float buckets, <ax:..>, <t:..>, .0 to .15, @) in a fixed order, so
 * unseen sizes and nests never fall to <unk>; then every other token seen at least min_count
 * times in the training texts, by count (descending) then bytes (ascending): the same texts in
 * any order give the same vocabulary. Tokenizing is deterministic and allocates only the
 * output array. */
#ifndef CWM_TOKENIZER_H
#define CWM_TOKENIZER_H

#include <stddef.h>

#include "cwm/util.h"

#define CWM_TOK_PAD 0
#define CWM_TOK_UNK 1
#define CWM_TOKEN_MAX 64   /* longest token string a vocabulary holds */
/* Bumped whenever the rules above change: a vocabulary of another scheme does not load. */
#define CWM_TOKENIZER_SCHEME 2

typedef struct cwm_vocab cwm_vocab;

/* A builder: feed it texts, then finish it into a vocabulary (the same object). */
cwm_vocab *cwm_vocab_new_builder(void);
/* Counts the tokens of one text. Fails (CWM_EINTERNAL) on a finished vocabulary. */
int cwm_vocab_add_text(cwm_vocab *v, const char *text, cwm_err *err);
int cwm_vocab_add_text_n(cwm_vocab *v, const char *text, size_t len, cwm_err *err);
/* Keeps every counted token seen at least min_count (>= 1) times and makes v usable by
 * cwm_tokenize; the counts are dropped. */
int cwm_vocab_finish(cwm_vocab *v, int min_count, cwm_err *err);
void cwm_vocab_free(cwm_vocab *v);

int cwm_vocab_size(const cwm_vocab *v);
/* The id of a token string, CWM_TOK_UNK when absent. */
int cwm_vocab_lookup(const cwm_vocab *v, const char *token);
/* The token string of an id (debugging, tests); "<bad id>" when out of range. */
const char *cwm_token_name(const cwm_vocab *v, int id);

/* Tokenizes text into *ids (malloc'ed, never NULL on success, free() it) and *n. */
int cwm_tokenize(const cwm_vocab *v, const char *text, int **ids, int *n, cwm_err *err);
int cwm_tokenize_n(const cwm_vocab *v, const char *text, size_t len, int **ids, int *n, cwm_err *err);

/* Serialized form (little-endian): "CWMVOCAB", u32 format version (1), u32 tokenizer scheme,
 * u32 token count, per token u8 length + its bytes, u64 FNV-1a of all preceding bytes.
 * save appends to out (a byte buffer; its NUL terminator is not part of the data). */
int cwm_vocab_save(const cwm_vocab *v, cwm_buf *out, cwm_err *err);
/* Parses and validates a serialized vocabulary; every defect (truncation, a changed byte,
 * another scheme, duplicate tokens, an absurd count) is CWM_EMODEL naming what is wrong. */
cwm_vocab *cwm_vocab_load(const void *data, size_t n, cwm_err *err);

#endif
