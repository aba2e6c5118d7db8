"""A gRPC client generated from Sluice's .proto by grpcio-tools: join, then status.

usage: grpc_client.py PROTO_DIR GRPC_ADDR ROOM
Prints the status as JSON.
"""
import json
import os
import subprocess
import sys
import tempfile

proto_dir, addr, room = sys.argv[1], sys.argv[2], sys.argv[3]
out = tempfile.mkdtemp()
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
     os.path.join(proto_dir, "sluice.proto")],
    check=True,
)
sys.path.insert(0, out)
import grpc  # noqa: E402
import sluice_pb2  # noqa: E402
import sluice_pb2_grpc  # noqa: E402

with grpc.insecure_channel(addr) as ch:
    stub = sluice_pb2_grpc.VisitorStub(ch)
    joined = stub.Join(sluice_pb2.JoinRequest(room=room), timeout=20)
    status = stub.Status(sluice_pb2.VisitorRequest(room=room, ticket=joined.ticket, consistent=True), timeout=20)
    print(json.dumps({
        "join_state": joined.state,
        "state": status.state,
        "visitor_id": status.visitor_id,
        "same_visitor": joined.visitor_id == status.visitor_id,
        "admission_token": status.admission_token if status.HasField("admission_token") else None,
        "applied_index": status.applied_index,
    }))
