"""Independent reader of an object-store sink's output: downloads what a
dataset reader would see under a prefix with the store's own Python client
(not Flightline's code), so pyarrow.dataset can read it from a local
directory.

usage: store_fetch.py gcs BUCKET PREFIX DEST      google-cloud-storage against
                                                  FLIGHTLINE_GCS_ENDPOINT
                                                  (fake-gcs-server, anonymous)
       store_fetch.py azblob CONTAINER PREFIX DEST azure-storage-blob against
                                                  FLIGHTLINE_AZURITE_ENDPOINT,
                                                  _ACCOUNT, _KEY
       store_fetch.py s3 BUCKET PREFIX DEST       pyarrow's S3FileSystem (the
                                                  AWS C++ SDK) against
                                                  FLIGHTLINE_S3_ENDPOINT,
                                                  _ACCESS_KEY, _SECRET_KEY

Lists every object under PREFIX/, skips those with a path component
starting with '_' or '.' (what dataset readers skip: the commit records and
staged data), and writes the rest under DEST with their relative paths.
Prints the number of files written.
"""
import os
import sys

kind, bucket, prefix, dest = sys.argv[1:5]
prefix = prefix.strip("/") + "/"


def objects():
    if kind == "gcs":
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        # The client reads the emulator's address from this variable.
        os.environ["STORAGE_EMULATOR_HOST"] = os.environ["FLIGHTLINE_GCS_ENDPOINT"]
        client = storage.Client(project="test", credentials=AnonymousCredentials())
        for blob in client.list_blobs(bucket, prefix=prefix):
            yield blob.name, blob.download_as_bytes
    elif kind == "azblob":
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient(
            account_url=os.environ["FLIGHTLINE_AZURITE_ENDPOINT"],
            credential={"account_name": os.environ["FLIGHTLINE_AZURITE_ACCOUNT"],
                        "account_key": os.environ["FLIGHTLINE_AZURITE_KEY"]},
        )
        container = service.get_container_client(bucket)
        for blob in container.list_blobs(name_starts_with=prefix):
            yield blob.name, (lambda n=blob.name: container.download_blob(n).readall())
    elif kind == "s3":
        from urllib.parse import urlparse

        import pyarrow.fs as pafs

        endpoint = urlparse(os.environ["FLIGHTLINE_S3_ENDPOINT"])
        s3 = pafs.S3FileSystem(
            access_key=os.environ["FLIGHTLINE_S3_ACCESS_KEY"],
            secret_key=os.environ["FLIGHTLINE_S3_SECRET_KEY"],
            endpoint_override=endpoint.netloc, scheme=endpoint.scheme,
            region=os.environ.get("FLIGHTLINE_S3_REGION", "us-east-1"),
        )
        base = bucket + "/" + prefix
        for info in s3.get_file_info(pafs.FileSelector(base.rstrip("/"), recursive=True, allow_not_found=True)):
            if info.type != pafs.FileType.File:
                continue
            def read(p=info.path):
                with s3.open_input_stream(p) as f:
                    return f.read()
            yield info.path[len(bucket) + 1:], read
    else:
        sys.exit(f"store_fetch.py: unknown kind {kind!r}")


n = 0
for name, read in objects():
    rel = name[len(prefix):]
    if any(c.startswith(("_", ".")) for c in rel.split("/")):
        continue
    path = os.path.join(dest, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(read())
    n += 1
print(n)
sys.stdout.flush()
os._exit(0)
