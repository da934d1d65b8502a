#pragma once
// Which rank reads a saved box that several ranks need, and who sends it to whom: the coordinator's
// part of a read-once load (LoadOptions::read_once).

#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>

#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// Boxes that rank `from` reads from storage for rank `to`, as `to`'s own read items (which `to`'s
/// plan no longer holds). `from`'s plan reads the same boxes, of the same saved chunks.
struct ReadOnceTransfer {
  int from = 0;
  int to = 0;
  std::vector<ReadItem> items;
};

/// A rank's part in a read-once load: the transfers it sends or receives, in the one global order
/// every rank follows (by sender, then receiver). Following it, with blocking sends, no rank
/// waits for another that waits in turn: the first unfinished transfer of that order always has
/// both its ranks at it.
struct ReadOnceSchedule {
  std::vector<ReadOnceTransfer> transfers;
};

/// On the coordinator, after global planning: every read item that the plans of several ranks
/// hold alike (the same type, saved chunk, box within it; the destinations may differ) stays in
/// the plan of one of them and leaves the others', which receive it from that rank. The reader of
/// each shared box is the needing rank with the fewest bytes to read so far, taking the largest
/// boxes first, so that the reading spreads evenly. Returns every rank's schedule, by rank.
/// `metadata` gives the items' sizes; duplicates within one rank's plan stay where they are.
std::vector<ReadOnceSchedule> schedule_read_once(std::vector<LoadPlan>& plans,
                                                 const Metadata& metadata);

std::string encode_read_once_schedule(const ReadOnceSchedule& schedule);

/// Throws CheckpointError (kCorrupt) when `bytes` are not the schedule of rank `rank` of `size`
/// ranks (a transfer with a rank out of range, to itself, or between two other ranks).
ReadOnceSchedule decode_read_once_schedule(std::string_view bytes, int rank, int size);

/// What identifies the saved bytes a read item reads: its type, saved chunk and box within it.
/// Equal keys, equal bytes.
std::string saved_box_key(const ReadItem& item);

}  // namespace dcpp::detail
