//===- RowTransforms.cpp - rows transformed before the kernel proper ------===//
//
// Cosine, bilinear and additive scores, and dot products of projected features,
// transform the rows of q and k once per call (normalise; project by the
// learnable weights) and run the dot (additive: tanh-dot) kernels on the
// transformed rows; their backward chains dq', dk' back to dq, dk and the
// weights' gradients.
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"

#include "lib/Analysis/KernelSignature.h"

#include "attn/abi.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <tuple>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

bool CPUKernelBuilder::transformsRows(bool querySide) {
  if (!score)
    return false;
  switch (score.getContract()) {
  case ContractKind::Cosine:
  case ContractKind::Additive:
    return true;
  case ContractKind::Bilinear:
    return querySide;
  case ContractKind::Dot:
  case ContractKind::ScaledDot:
    return score.getNumWeights() != 0; // W q and W k before the feature map
  }
  llvm_unreachable("unknown contract kind");
}

Value CPUKernelBuilder::inverseEpsilonNorm(Value matrix, Value r) {
  Value squares = loop(index(0), dim(matrix, 1), {constant(kCosineEpsilon * kCosineEpsilon)},
                       [&](Value c, ValueRange acc) -> SmallVector<Value> {
                         Value x = load(matrix, {r, c});
                         return {add(acc[0], mul(x, x))};
                       })[0];
  return math::RsqrtOp::create(b, squares);
}

std::optional<CPUKernelBuilder::Projection> CPUKernelBuilder::projectionOf(bool querySide) {
  SmallVector<KernelWeight> weights = kernelWeights(kernel);
  switch (score.getContract()) {
  case ContractKind::Bilinear: { // q' = q·W: W(o, c) = W[c, o]
    int64_t d = weights[0].shape[0];
    return Projection{index(weights[0].offset), d, 1, d};
  }
  case ContractKind::Additive: { // q' = W_q·q: W(o, c) = W_q[o, c]
    const KernelWeight &w = weights[querySide ? 0 : 1];
    return Projection{index(w.offset), w.shape[0], w.shape[1], 1};
  }
  case ContractKind::Dot:
  case ContractKind::ScaledDot: { // q' = W·q, k' = W·k (one shared W)
    const KernelWeight &w = weights[0];
    return Projection{index(w.offset), w.shape[0], w.shape[1], 1};
  }
  default:
    return std::nullopt;
  }
}

std::pair<Value, Value> CPUKernelBuilder::allocMatrix(Value rows, Value cols) {
  Value buffer = memref::AllocOp::create(
      b, MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, type),
      ValueRange{rows, cols}, b.getI64IntegerAttr(64));
  return {memref::CastOp::create(b, matrixType, buffer), buffer};
}

void CPUKernelBuilder::transformRows(bool querySide, Value src, Value dst, Value params,
                                     Value begin, Value end) {
  Value cols = dim(src, 1);
  std::optional<Projection> projection = projectionOf(querySide);
  loop(begin, end, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
    if (!projection) { // cosine: x / |x|_ε
      Value inverseNorm = inverseEpsilonNorm(src, r);
      loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        store(mul(load(src, {r, c}), inverseNorm), dst, {r, c});
        return {};
      });
      return {};
    }
    loop(index(0), index(projection->outDim), {}, [&](Value o, ValueRange) -> SmallVector<Value> {
      Value row = arith::AddIOp::create(b, projection->offset,
                                        arith::MulIOp::create(b, o, index(projection->outStride)));
      Value sum =
          loop(index(0), cols, {constant(0.0)}, [&](Value c, ValueRange acc) -> SmallVector<Value> {
            Value at = arith::AddIOp::create(
                b, row, arith::MulIOp::create(b, c, index(projection->inStride)));
            return {add(acc[0], mul(load(src, {r, c}), load(params, {at})))};
          })[0];
      store(sum, dst, {r, o});
      return {};
    });
    return {};
  });
}

void CPUKernelBuilder::chainRows(bool querySide, Value src, Value dTransformed, Value dSrc,
                                 Value params, Value dParams, Value begin, Value end) {
  Value cols = dim(src, 1);
  std::optional<Projection> projection = projectionOf(querySide);
  loop(begin, end, {}, [&](Value r, ValueRange) -> SmallVector<Value> {
    if (!projection) { // x̂ = x/n: dx = (dx̂ - x̂·(x̂·dx̂))/n
      Value inverseNorm = inverseEpsilonNorm(src, r);
      Value along =
          loop(index(0), cols, {constant(0.0)}, [&](Value c, ValueRange acc) -> SmallVector<Value> {
            Value unit = mul(load(src, {r, c}), inverseNorm);
            return {add(acc[0], mul(unit, load(dTransformed, {r, c})))};
          })[0];
      loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
        Value unit = mul(load(src, {r, c}), inverseNorm);
        store(mul(sub(load(dTransformed, {r, c}), mul(unit, along)), inverseNorm), dSrc, {r, c});
        return {};
      });
      return {};
    }
    // out[r, o] = Σ_c x[r, c]·W(o, c): dx[r, c] = Σ_o dout[r, o]·W(o, c), dW(o, c) += dout[r,
    // o]·x[r, c]
    loop(index(0), cols, {}, [&](Value c, ValueRange) -> SmallVector<Value> {
      Value x = load(src, {r, c});
      Value column = arith::AddIOp::create(
          b, projection->offset, arith::MulIOp::create(b, c, index(projection->inStride)));
      Value sum = loop(index(0), index(projection->outDim), {constant(0.0)},
                       [&](Value o, ValueRange acc) -> SmallVector<Value> {
                         Value at = arith::AddIOp::create(
                             b, column, arith::MulIOp::create(b, o, index(projection->outStride)));
                         Value grad = load(dTransformed, {r, o});
                         store(add(load(dParams, {at}), mul(grad, x)), dParams, {at});
                         return {add(acc[0], mul(grad, load(params, {at})))};
                       })[0];
      store(sum, dSrc, {r, c});
      return {};
    });
    return {};
  });
}

void CPUKernelBuilder::buildTransformedForward(StringRef entryName) {
  Block *entry = entryPoint(entryName, forwardInputs(matrixType), EntryRole::Forward);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args(entry->getArguments());
  ForwardArgs named = forwardArguments(b, args);
  Value q = named.q, k = named.k, params = named.params;
  SmallVector<Value> buffers;
  auto transformed = [&](bool querySide, Value x, Value begin, Value end) {
    if (!transformsRows(querySide))
      return x;
    std::optional<Projection> projection = projectionOf(querySide);
    Value width = projection ? index(projection->outDim) : dim(x, 1);
    auto [matrix, buffer] = allocMatrix(dim(x, 0), width);
    buffers.push_back(buffer);
    transformRows(querySide, x, matrix, params, begin, end);
    return matrix;
  };
  // Only this call's query rows are read; every key row may be.
  args[ATTN_FORWARD_Q] = transformed(true, q, named.qBegin, named.qEnd);
  args[ATTN_FORWARD_K] = transformed(false, k, index(0), dim(k, 0));
  func::CallOp::create(b, (entryName + ".inner").str(), TypeRange{}, args);
  for (Value buffer : buffers)
    memref::DeallocOp::create(b, buffer);
  func::ReturnOp::create(b);
}

void CPUKernelBuilder::buildTransformedBackward(StringRef entryName) {
  Block *entry = entryPoint(entryName, backwardInputs(matrixType), EntryRole::Backward);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args(entry->getArguments());
  BackwardArgs named = backwardArguments(b, args);
  Value q = named.q, k = named.k, params = named.params, dq = named.dq, dk = named.dk,
        dParams = named.dParams;
  // The inner kernel writes the scalar params' gradients; the weights' start at 0.
  for (const KernelWeight &weight : kernelWeights(kernel))
    loop(index(weight.offset), index(weight.offset + weight.size), {},
         [&](Value p, ValueRange) -> SmallVector<Value> {
           store(constant(0.0), dParams, {p});
           return {};
         });
  SmallVector<Value> buffers;
  struct Side {
    bool querySide;
    Value x, transformed, grad, dx, begin, end;
  };
  SmallVector<Side> sides;
  // Only this call's query rows and keys are read and chained back.
  Value kvEnd = arith::IndexCastOp::create(b, b.getIndexType(), named.kvLen);
  for (auto [querySide, x, dx, position, gradPosition, begin, end] :
       {std::tuple{true, q, dq, ATTN_BACKWARD_Q, ATTN_BACKWARD_DQ, named.qBegin, named.qEnd},
        std::tuple{false, k, dk, ATTN_BACKWARD_K, ATTN_BACKWARD_DK, named.kvBegin, kvEnd}}) {
    if (!transformsRows(querySide))
      continue;
    std::optional<Projection> projection = projectionOf(querySide);
    Value width = projection ? index(projection->outDim) : dim(x, 1);
    auto [matrix, buffer] = allocMatrix(dim(x, 0), width);
    auto [grad, gradBuffer] = allocMatrix(dim(x, 0), width);
    buffers.append({buffer, gradBuffer});
    transformRows(querySide, x, matrix, params, begin, end);
    args[position] = matrix;
    args[gradPosition] = grad;
    sides.push_back({querySide, x, matrix, grad, dx, begin, end});
  }
  func::CallOp::create(b, (entryName + ".inner").str(), TypeRange{}, args);
  for (const Side &side : sides)
    chainRows(side.querySide, side.x, side.grad, side.dx, params, dParams, side.begin, side.end);
  for (Value buffer : buffers)
    memref::DeallocOp::create(b, buffer);
  func::ReturnOp::create(b);
}
