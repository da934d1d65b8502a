#pragma once
// Counts of the corruption harness's outcomes, by file kind, damage kind and region, printed as
// Markdown tables.

#include <map>
#include <ostream>
#include <string>

namespace dcpp::corruption {

struct Outcome {
  int trials = 0;
  int verify_detected = 0;
  int verify_named = 0;  // detected, naming the file (and key)
  int load_detected = 0;
  int load_named = 0;
  int crashes = 0;  // an exception other than CheckpointError, from verify or load
};

class Tally {
 public:
  /// Adds one trial's outcome under each of its groups ("file kind", "damage", "region").
  void add(const std::string& group, const std::string& label, bool verify_detected,
           bool verify_named, bool load_detected, bool load_named, bool crashed);
  /// One table per group, then the totals.
  void print(std::ostream& out) const;
  const Outcome& total() const { return total_; }

 private:
  std::map<std::string, std::map<std::string, Outcome>> groups_;
  Outcome total_;
};

}  // namespace dcpp::corruption
