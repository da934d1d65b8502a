#pragma once
// The storage writer and reader of a Location (location.h): its scheme's driver
// (location_driver.h), and for reading, the layout found there (checkpoint_layout.h).

#include <dcpp/core/export.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/location.h>
#include <dcpp/storage/location_driver.h>
#include <dcpp/storage/s3_options.h>

#include <memory>
#include <string>

namespace dcpp {

/// DCP's storage writer at `location`, from its scheme's driver: a FileSystemWriter of a
/// directory, an S3StorageWriter of an s3:// URL (S3WriterOptions::from(layout, *location.s3())).
/// `layout` says how DCP's files are cut, whatever stores them. A location whose with_layout names
/// a layout gets that layout's writer around it (CheckpointLayout::make_writer: Megatron-Core's
/// adds `metadata.json`, megatron_storage.h).
DCPP_API std::unique_ptr<StorageWriter> make_storage_writer(
    const Location& location, const FileSystemWriterOptions& layout = {});

/// The reader of the checkpoint at `location`, in the layout found there (checkpoint_layout()):
/// DCP's through the scheme's driver (an S3StorageReader takes `reading`'s checks and at least
/// S3ReaderOptions' default threads), or a Hugging Face directory's.
DCPP_API std::unique_ptr<StorageReader> make_storage_reader(
    const Location& location, const FileSystemReaderOptions& reading = {});

/// Deprecated in 0.2, removed in 0.3: the S3 options travel with the location.
[[deprecated(
    "give the S3 options to the Location: make_storage_writer(Location(url).with_s3(s3), "
    "layout); this overload goes in 0.3")]] DCPP_API std::unique_ptr<StorageWriter>
make_storage_writer(const std::string& location, const FileSystemWriterOptions& layout,
                    const S3Options& s3);
/// Deprecated in 0.2, removed in 0.3: as make_storage_writer's. Reads DCP's layout only.
[[deprecated(
    "give the S3 options to the Location: make_storage_reader(Location(url).with_s3(s3), "
    "reading); this overload goes in 0.3")]] DCPP_API std::unique_ptr<StorageReader>
make_storage_reader(const std::string& location, const FileSystemReaderOptions& reading,
                    const S3Options& s3);

}  // namespace dcpp
