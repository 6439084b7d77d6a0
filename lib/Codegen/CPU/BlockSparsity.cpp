//===- BlockSparsity.cpp - tiles the mask skips or keeps whole ------------===//
//
// The tiled schedules classify each (row block, key tile) by the interval
// arithmetic of lib/Analysis/MaskIntervals.h over the tile's absolute positions
// (its rows and keys shifted by the call's query_start and key_start): a tile the
// mask keeps no pair of is skipped (no score, no exp, no W·V or gradient), one it
// keeps whole runs without evaluating the mask. A `tables` mask's reads indexed by i or j take
// their value range on a tile from per-block minima and maxima that each call
// computes once, in O(N) reads (document ids: tiles of different documents are
// skipped, tiles inside one document are kept whole).
//
//===----------------------------------------------------------------------===//
#include "lib/Codegen/CPU/CPUKernelBuilder.h"

#include "lib/Analysis/KernelSignature.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::cpu;

Value CPUKernelBuilder::tableOf(ReadOp read) {
  auto input = SymbolTable::lookupNearestSymbolFrom<InputOp>(read, read.getInputAttr());
  SmallVector<InputOp> inputs = kernelInputs(kernel);
  return tableValues[llvm::find(inputs, input) - inputs.begin()];
}

Value CPUKernelBuilder::readAt(const MaskRead &maskRead, Value position) {
  ReadOp read = maskRead.read;
  SmallVector<Value> indices;
  for (auto [d, index] : llvm::enumerate(read.getIndices()))
    indices.push_back(maskRead.rangeDim == d ? position
                                             : fixedReadIndex(b, index, batchIndex, headIndex));
  return TableLoadOp::create(b, read.getType(), tableOf(read), indices);
}

void CPUKernelBuilder::prepareBlockSparsity(int64_t blockKeys, Value positions) {
  classifier.reset();
  MaskOp mask = kernel.getMaskOp();
  std::optional<BlockSparsity> sparsity = kernel.getBlockSparsity();
  if (!mask || !sparsity || *sparsity == BlockSparsity::Dense)
    return;
  TileClassifier prepared{mask, blockKeys, {}, {}};
  if (*sparsity == BlockSparsity::Tables)
    prepared.reads = maskReads(mask);
  Value blockSize = index(blockKeys);
  // Rows and keys sit at their absolute positions: past `positions` by up to the
  // larger start (reads there clamp to the table like the regions' reads).
  positions = arith::AddIOp::create(b, positions,
                                    arith::MaxSIOp::create(b, queryPosition, keyPosition));
  Value blocks = arith::CeilDivSIOp::create(b, positions, blockSize);
  for (const MaskRead &read : prepared.reads) {
    if (!read.rangeDim) {
      prepared.readBlocks.push_back(Value());
      continue;
    }
    Value extremes = memref::AllocOp::create(
        b, MemRefType::get({ShapedType::kDynamic, 2}, ReadOp(read.read).getType()),
        ValueRange{blocks});
    loop(index(0), blocks, {}, [&](Value block, ValueRange) -> SmallVector<Value> {
      Value begin = arith::MulIOp::create(b, block, blockSize);
      Value end = arith::MinSIOp::create(b, arith::AddIOp::create(b, begin, blockSize), positions);
      Value first = readAt(read, begin);
      ValueRange range = loop(arith::AddIOp::create(b, begin, index(1)), end, {first, first},
                              [&](Value position, ValueRange minMax) -> SmallVector<Value> {
                                Value x = readAt(read, position);
                                return {arith::MinSIOp::create(b, minMax[0], x),
                                        arith::MaxSIOp::create(b, minMax[1], x)};
                              });
      store(range[0], extremes, {block, index(0)});
      store(range[1], extremes, {block, index(1)});
      return {};
    });
    prepared.readBlocks.push_back(extremes);
  }
  classifier = std::move(prepared);
}

void CPUKernelBuilder::freeBlockSparsity() {
  if (classifier)
    for (Value extremes : classifier->readBlocks)
      if (extremes)
        memref::DeallocOp::create(b, extremes);
  classifier.reset();
}

std::optional<TileClass> CPUKernelBuilder::classifyTile(IntRange rows, IntRange keys) {
  if (!classifier)
    return std::nullopt;
  rows = {queryAt(rows.lo), queryAt(rows.hi)};
  keys = {keyAt(keys.lo), keyAt(keys.hi)};
  auto readRange = [&](const MaskRead &read, const TileRanges &tile) -> IntRange {
    if (!read.rangeDim) {
      Value element = readAt(read, Value());
      return {element, element};
    }
    unsigned site =
        llvm::find_if(classifier->reads, [&](const MaskRead &r) { return r.read == read.read; }) -
        classifier->reads.begin();
    Value extremes = classifier->readBlocks[site];
    // The blocks [lo / blockKeys, hi / blockKeys] cover the tile's positions.
    IntRange over = read.querySide ? tile.i : tile.j;
    Value blockSize = index(classifier->blockKeys);
    Value first = arith::DivUIOp::create(b, over.lo, blockSize);
    Value last = arith::DivUIOp::create(b, over.hi, blockSize);
    ValueRange range =
        loop(arith::AddIOp::create(b, first, index(1)), arith::AddIOp::create(b, last, index(1)),
             {load(extremes, {first, index(0)}), load(extremes, {first, index(1)})},
             [&](Value block, ValueRange minMax) -> SmallVector<Value> {
               return {arith::MinSIOp::create(b, minMax[0], load(extremes, {block, index(0)})),
                       arith::MaxSIOp::create(b, minMax[1], load(extremes, {block, index(1)}))};
             });
    return {range[0], range[1]};
  };
  return emitTileClass(b, classifier->mask, TileRanges{batchIndex, headIndex, rows, keys},
                       readRange);
}

SmallVector<Value> CPUKernelBuilder::classifiedTile(IntRange rows, IntRange keys, ValueRange acc,
                                                    function_ref<SmallVector<Value>(bool)> step,
                                                    function_ref<void()> skipped) {
  std::optional<TileClass> tileClass = classifyTile(rows, keys);
  if (!tileClass)
    return step(static_cast<bool>(fns.mask));
  TypeRange types = acc.getTypes();
  return llvm::to_vector(branch(
      tileClass->anyKept, types,
      [&] {
        return llvm::to_vector(branch(
            tileClass->allKept, types, [&] { return step(/*evaluateMask=*/false); },
            [&] { return step(/*evaluateMask=*/true); }));
      },
      [&] {
        if (skipped)
          skipped();
        return SmallVector<Value>(acc.begin(), acc.end());
      }));
}

void CPUKernelBuilder::enterIfAnyKept(IntRange rows, IntRange keys) {
  std::optional<TileClass> region = classifyTile(rows, keys);
  if (!region)
    return;
  auto ifAnyKept = scf::IfOp::create(b, region->anyKept, /*withElseRegion=*/false);
  b.setInsertionPoint(ifAnyKept.thenBlock()->getTerminator());
}
