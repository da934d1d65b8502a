#pragma once
// A storage driver for a location: a directory or an "s3://bucket/prefix" URL.

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/s3_options.h>
#include <dcpp/storage/s3_storage.h>

#include <memory>
#include <string>

namespace dcpp {

/// An S3StorageWriter for an s3:// URL (S3WriterOptions::from(layout, s3)), else a
/// FileSystemWriter of the directory with `layout`.
DCPP_API std::unique_ptr<StorageWriter> make_storage_writer(const std::string& location,
                                                            const FileSystemWriterOptions& layout,
                                                            const S3Options& s3 = {});

/// An S3StorageReader for an s3:// URL (with `options`' checks and at least
/// S3ReaderOptions' default threads), else a FileSystemReader of the directory.
DCPP_API std::unique_ptr<StorageReader> make_storage_reader(const std::string& location,
                                                            const FileSystemReaderOptions& options,
                                                            const S3Options& s3 = {});

}  // namespace dcpp
