//===- SignAnalysis.h - the signs a region's values can take -----*- C++ -*-===//
//
// For every value of a single-block region: the set of signs (< 0, = 0, > 0) it can
// take in exact arithmetic, whatever its arguments are within their own sign sets.
// One pass over the ops in order, each value computed once from its operands', so
// the cost is linear in the region even where values are shared (regions are DAGs,
// not trees). Unknown ops take any sign. NaN is not a sign: an op that is NaN
// somewhere (sqrt or log of a negative) gets every sign, so "can be 0" and "can be
// negative" stay conservative.
//
// Used by the classifier (e^x with x <= 0 is bounded) and by the denominator
// check (can C_i = ε + Σ_j h vanish).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_LIB_ANALYSIS_SIGNANALYSIS_H
#define ATTN_LIB_ANALYSIS_SIGNANALYSIS_H

#include "mlir/IR/Region.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::attn {

/// The value of `v` where an arith.constant defines it (a float, or an integer as a
/// double); none otherwise.
std::optional<double> constantNumber(Value v);

/// A set of signs, as bits.
class SignSet {
public:
  enum Bits : uint8_t { Negative = 1, Zero = 2, Positive = 4 };
  constexpr SignSet(uint8_t bits = Negative | Zero | Positive) : bits(bits) {}
  static constexpr SignSet any() { return SignSet(Negative | Zero | Positive); }
  static constexpr SignSet nonNegative() { return SignSet(Zero | Positive); }
  static constexpr SignSet positive() { return SignSet(Positive); }
  /// The sign of the number `x`.
  static SignSet of(double x);

  bool canBe(Bits b) const { return bits & b; }
  /// Never < 0 / never > 0 / never 0.
  bool isNonNegative() const { return !canBe(Negative); }
  bool isNonPositive() const { return !canBe(Positive); }
  bool isNonZero() const { return !canBe(Zero); }
  bool operator==(SignSet other) const { return bits == other.bits; }
  SignSet operator|(SignSet other) const { return SignSet(bits | other.bits); }
  SignSet negated() const;
  /// "x ≥ 0", "x > 0", "any sign", ... for diagnostics.
  std::string describe() const;

  uint8_t bits;
};

class SignAnalysis {
public:
  /// Analyses `region`'s block; argument k takes `argumentSigns[k]` where given,
  /// else any sign (index arguments, which are positions, are never negative).
  explicit SignAnalysis(Region &region, ArrayRef<SignSet> argumentSigns = {});

  /// The signs `v` can take (any sign for a value outside the region).
  SignSet of(Value v) const;
  /// The signs of the value the region yields.
  SignSet ofResult() const;

private:
  SignSet compute(Operation &op) const;
  llvm::DenseMap<Value, SignSet> signs;
  Region &region;
};

} // namespace mlir::attn

#endif
