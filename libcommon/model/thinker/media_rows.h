// Row positions of media tokens in a packed sequence, and reading / writing those rows of [S, D] activations.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace veomni {

// Indices of the true entries of a bool (or u8) [length] mask, ascending; an undefined mask has none. A mask of
// another shape or dtype is an InputError naming `what`.
std::vector<int64_t> mask_positions(const Tensor& mask, int64_t length, const std::string& what);

// Row selection by position, built on the embedding ops (gather = embedding_forward over the activations, scatter-add
// = embedding_backward), so it runs on any backend. positions: i64 [n] on the activations' device.
Tensor positions_tensor(const std::vector<int64_t>& positions, Device device);
// out [n, D] = x[positions].
Tensor gather_rows(const Tensor& x, const Tensor& positions);
// x[positions] += rows.
void add_rows(Tensor& x, const Tensor& positions, const Tensor& rows);
// x[positions] = 0 (x - x is exactly zero for finite values).
void zero_rows(Tensor& x, const Tensor& positions);

}  // namespace veomni
