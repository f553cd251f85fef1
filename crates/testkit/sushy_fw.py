"""rackflow's firmware extension of the sushy-tools Redfish emulator (tests only).

THIS FILE IS OUR CODE, NOT PART OF SUSHY-TOOLS. It imports sushy-tools'
own Flask application (`sushy_tools.emulator.main`, version 2.2.0 from
PyPI), leaves everything it serves untouched (systems, power, basic auth,
TLS, the TaskService root), and adds what its fake driver lacks so that
rackflow's Redfish firmware path can be tested against an emulator:

- `GET /redfish/v1/UpdateService` (replaces sushy's view): advertises
  `UpdateService.SimpleUpdate` and/or `MultipartHttpPushUri`, and links a
  `FirmwareInventory`;
- `POST .../UpdateService.SimpleUpdate` (replaces sushy's view, which
  answers 500 under the fake driver): downloads `ImageURI` over HTTP, like
  a BMC would, and starts a task;
- `POST /redfish/v1/UpdateService/upload`: the multipart push
  (`UpdateParameters` JSON part + `UpdateFile` part), starts a task;
- `GET /redfish/v1/UpdateService/FirmwareInventory[/<id>]`: BMC 1.0.0 and
  BIOS 0.9.0 at start;
- `GET /redfish/v1/TaskService/Tasks[/<id>]` and
  `/redfish/v1/TaskService/TaskMonitors/<id>`: tasks that go New ->
  Running (PercentComplete rising) -> Completed over
  RACKFLOW_FW_TASK_SECONDS (default 1 s), and then set the component's
  inventory Version to the image's.

The image is text with `key=value` lines: `version=` (required), optional
`component=` (default BMC) and the fault switch `fail=<message>`, which
makes the task end in `Exception` half way, with that message in
`Messages`. `accept=monitor` makes the update answer 202 with only a
`Location` to the task monitor (no Task body). `flaky=N` makes the first N
reads of the task answer 503, like a BMC too busy flashing to answer.

Environment: RACKFLOW_FW_SIMPLE_UPDATE=0 hides SimpleUpdate,
RACKFLOW_FW_MULTIPART=0 hides the multipart push.

Rack power (for the rack manager's cold reboot), between emulator processes
through a shared file RACKFLOW_RACK_POWER: an emulator with
RACKFLOW_RACK_ROLE=shelf is a power shelf — a reset that turns it off or on
writes its pending state and the time sushy applies it (sushy's fake driver
applies a power change 1-11 s after the request) to the file. An emulator
with RACKFLOW_RACK_ROLE=tray is a tray the shelf feeds: while the shelf is
off it answers every Redfish request 503 (its BMC has no power), and on the
first request after power is back its systems read Off (the host lost
power). `GET /rackflow/resets` lists the resets this emulator received
(time, system, ResetType) and `GET /rackflow/power` how many requests it
refused unpowered; neither is refused.

Coolant leak detectors (for the rack manager's ListLeakDetectors): the
first chassis links a `ThermalSubsystem` (added to sushy's chassis view)
whose `LeakDetection` holds the `LeakDetectors` named by
RACKFLOW_LEAK_DETECTORS (comma-separated ids, default `ColdPlate,Manifold`;
empty: the chassis exposes no leak detection). Each reads `DetectorState`
OK until `POST /rackflow/leak` with `{"detector": ID, "state":
"OK"|"Warning"|"Critical"}` sets it; `GET /rackflow/leak` lists the states.

Tray topology (for the rack manager's GetNodeDeviceInfo): the first chassis
carries NVIDIA's cable-cartridge block, `Oem.Nvidia` with
`ChassisPhysicalSlotNumber` (RACKFLOW_SLOT_NUMBER, default 7),
`ComputeTrayIndex` (RACKFLOW_TRAY_INDEX, default 3), `RevisionId` 2 and
`TopologyId` 0, and `SerialNumber` RACKFLOW_CHASSIS_SERIAL (default
1821220000000) — the field names NVIDIA's bmcweb uses; our values.
RACKFLOW_SLOT_NUMBER= (empty) leaves the block out (a BMC without it).

Run it exactly like `sushy-emulator` (same arguments), with the python of
the sushy-tools installation:  python sushy_fw.py --fake -i 127.0.0.1 -p N
"""

import itertools
import json
import os
import sys
import threading
import time
import urllib.request

import flask

from sushy_tools.emulator import main as sushy_main

app = sushy_main.app

TASK_SECONDS = float(os.environ.get("RACKFLOW_FW_TASK_SECONDS", "1.0"))
SIMPLE_UPDATE = os.environ.get("RACKFLOW_FW_SIMPLE_UPDATE", "1") != "0"
MULTIPART = os.environ.get("RACKFLOW_FW_MULTIPART", "1") != "0"

UPDATE_SERVICE = "/redfish/v1/UpdateService"
INVENTORY = UPDATE_SERVICE + "/FirmwareInventory"
PUSH_URI = UPDATE_SERVICE + "/upload"
TASKS = "/redfish/v1/TaskService/Tasks"
MONITORS = "/redfish/v1/TaskService/TaskMonitors"

_lock = threading.Lock()
_ids = itertools.count(1)
_inventory = {
    "BMC": {"Name": "BMC firmware", "Version": "1.0.0"},
    "BIOS": {"Name": "System BIOS", "Version": "0.9.0"},
}
_tasks = {}


def _json(body, status=200, headers=None):
    return flask.Response(json.dumps(body), status=status, headers=headers or {},
                          content_type="application/json")


def _error(status, message, message_id="Base.1.0.GeneralError"):
    return _json({"error": {
        "code": message_id,
        "message": "See @Message.ExtendedInfo for more information.",
        "@Message.ExtendedInfo": [{"MessageId": message_id, "Message": message,
                                   "Severity": "Critical"}],
    }}, status)


def _parse_image(data):
    fields = {}
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _advance(task, now):
    """Moves a task along its timeline; applies the new version once."""
    if task["state"] in ("Completed", "Exception"):
        return
    fraction = (now - task["created"]) / TASK_SECONDS if TASK_SECONDS > 0 else 1.0
    if task["fail"] is not None and fraction >= 0.5:
        task.update(state="Exception", percent=50, health="Critical",
                    messages=[{"MessageId": "Update.1.0.ApplyFailed",
                               "Message": task["fail"], "Severity": "Critical"}])
    elif fraction >= 1.0:
        item = _inventory.setdefault(task["component"], {"Name": task["component"]})
        item["Version"] = task["version"]
        task.update(state="Completed", percent=100, health="OK",
                    messages=[{"MessageId": "Update.1.0.UpdateSuccessful",
                               "Message": "%s updated to %s" % (task["component"], task["version"]),
                               "Severity": "OK"}])
    elif fraction > 0:
        task.update(state="Running", percent=max(1, min(99, int(fraction * 100))))


def _advance_all():
    now = time.monotonic()
    with _lock:
        for task in _tasks.values():
            _advance(task, now)


def _task_body(task_id):
    task = _tasks[task_id]
    return {
        "@odata.type": "#Task.v1_4_3.Task",
        "@odata.id": "%s/%s" % (TASKS, task_id),
        "Id": task_id,
        "Name": "Firmware update %s" % task_id,
        "TaskMonitor": "%s/%s" % (MONITORS, task_id),
        "TaskState": task["state"],
        "TaskStatus": task["health"],
        "PercentComplete": task["percent"],
        "Messages": task["messages"],
    }


def _start_task(image, targets):
    fields = _parse_image(image)
    if "version" not in fields:
        return _error(400, "The image has no version= line", "Update.1.0.InvalidImage")
    component = fields.get("component", "BMC")
    for target in targets or []:
        name = target.rstrip("/").rsplit("/", 1)[-1]
        if name not in _inventory:
            return _error(400, "Unknown update target %s" % target, "Base.1.0.PropertyValueNotInList")
        component = name
    with _lock:
        task_id = str(next(_ids))
        _tasks[task_id] = {
            "created": time.monotonic(), "state": "New", "percent": 0, "health": "OK",
            "messages": [], "component": component, "version": fields["version"],
            "fail": fields.get("fail"), "flaky": int(fields.get("flaky", "0")),
        }
        body = _task_body(task_id)
    headers = {"Location": "%s/%s" % (MONITORS, task_id)}
    if fields.get("accept") == "monitor":
        return flask.Response("", status=202, headers=headers)
    return _json(body, 202, headers)


def update_service():
    body = {
        "@odata.type": "#UpdateService.v1_11_0.UpdateService",
        "@odata.id": UPDATE_SERVICE,
        "Id": "UpdateService",
        "Name": "Update Service (rackflow test extension of sushy-tools)",
        "ServiceEnabled": True,
        "FirmwareInventory": {"@odata.id": INVENTORY},
        "Actions": {},
    }
    if SIMPLE_UPDATE:
        body["Actions"]["#UpdateService.SimpleUpdate"] = {
            "target": UPDATE_SERVICE + "/Actions/UpdateService.SimpleUpdate",
            "TransferProtocol@Redfish.AllowableValues": ["HTTP"],
        }
    if MULTIPART:
        body["MultipartHttpPushUri"] = PUSH_URI
    return _json(body)


def simple_update():
    if not SIMPLE_UPDATE:
        return _error(405, "SimpleUpdate is disabled on this emulator")
    request = flask.request.get_json(silent=True) or {}
    image_uri = request.get("ImageURI")
    if not image_uri:
        return _error(400, "ImageURI is required", "Base.1.0.PropertyMissing")
    try:
        with urllib.request.urlopen(image_uri, timeout=10) as answer:
            image = answer.read()
    except Exception as exc:  # noqa: BLE001 - any fetch failure is the client's
        return _error(400, "Unable to download the image from %s: %s" % (image_uri, exc),
                      "Update.1.0.TransferFailed")
    return _start_task(image, request.get("Targets"))


def multipart_push():
    if not MULTIPART:
        return _error(405, "multipart push is disabled on this emulator")
    upload = flask.request.files.get("UpdateFile")
    if upload is None:
        return _error(400, "The UpdateFile part is missing", "Base.1.0.PropertyMissing")
    raw = flask.request.form.get("UpdateParameters")
    if raw is None and "UpdateParameters" in flask.request.files:
        raw = flask.request.files["UpdateParameters"].read().decode("utf-8")
    try:
        parameters = json.loads(raw) if raw else {}
    except ValueError:
        return _error(400, "UpdateParameters is not JSON", "Base.1.0.MalformedJSON")
    return _start_task(upload.read(), parameters.get("Targets"))


def inventory():
    _advance_all()
    with _lock:
        members = [{"@odata.id": "%s/%s" % (INVENTORY, name)} for name in sorted(_inventory)]
    return _json({"@odata.type": "#SoftwareInventoryCollection.SoftwareInventoryCollection",
                  "@odata.id": INVENTORY, "Name": "Firmware Inventory",
                  "Members": members, "Members@odata.count": len(members)})


def inventory_item(item):
    _advance_all()
    with _lock:
        entry = _inventory.get(item)
        if entry is None:
            return _error(404, "No firmware inventory item %s" % item, "Base.1.0.ResourceMissingAtURI")
        return _json({"@odata.type": "#SoftwareInventory.v1_3_0.SoftwareInventory",
                      "@odata.id": "%s/%s" % (INVENTORY, item), "Id": item,
                      "Name": entry["Name"], "Version": entry["Version"], "Updateable": True,
                      "Status": {"State": "Enabled", "Health": "OK"}})


def tasks():
    _advance_all()
    with _lock:
        members = [{"@odata.id": "%s/%s" % (TASKS, t)} for t in _tasks]
    return _json({"@odata.type": "#TaskCollection.TaskCollection", "@odata.id": TASKS,
                  "Name": "Tasks", "Members": members, "Members@odata.count": len(members)})


def _busy(task_id):
    """Spends one of the task's `flaky` reads; caller holds the lock."""
    task = _tasks[task_id]
    if task["flaky"] > 0:
        task["flaky"] -= 1
        return True
    return False


def task(task_id):
    _advance_all()
    with _lock:
        if task_id not in _tasks:
            return _error(404, "No task %s" % task_id, "Base.1.0.ResourceMissingAtURI")
        if _busy(task_id):
            return _error(503, "The BMC is busy", "Base.1.0.ServiceTemporarilyUnavailable")
        return _json(_task_body(task_id))


def task_monitor(task_id):
    _advance_all()
    with _lock:
        if task_id not in _tasks:
            return _error(404, "No task %s" % task_id, "Base.1.0.ResourceMissingAtURI")
        if _busy(task_id):
            return _error(503, "The BMC is busy", "Base.1.0.ServiceTemporarilyUnavailable")
        body = _task_body(task_id)
    running = body["TaskState"] not in ("Completed", "Exception")
    return _json(body, 202 if running else 200)


# Replace sushy's two UpdateService views (same URLs, same endpoints) ...
app.view_functions["UpdateService.update_service_resource"] = update_service
app.view_functions["UpdateService.update_service_simple_update"] = simple_update
# ... and add the rest. Task ids are numbers from 1; sushy's fixed
# /redfish/v1/TaskService/Tasks/42 stays its own (werkzeug matches the
# static rule first), so tests never create 42 tasks.
app.add_url_rule(PUSH_URI, "rackflow_fw_push", multipart_push, methods=["POST"])
app.add_url_rule(INVENTORY, "rackflow_fw_inventory", inventory)
app.add_url_rule(INVENTORY + "/<item>", "rackflow_fw_inventory_item", inventory_item)
app.add_url_rule(TASKS, "rackflow_fw_tasks", tasks)
app.add_url_rule(TASKS + "/<task_id>", "rackflow_fw_task", task)
app.add_url_rule(MONITORS + "/<task_id>", "rackflow_fw_task_monitor", task_monitor)

RACK_POWER = os.environ.get("RACKFLOW_RACK_POWER")
RACK_ROLE = os.environ.get("RACKFLOW_RACK_ROLE", "")
_resets = []
_power = {"refused": 0, "lost": False}
_original_reset = app.view_functions["system_reset_action"]


def _rack_fed(now):
    """False while the shelf's last power-off has been applied."""
    try:
        with open(RACK_POWER) as f:
            state, apply_time = f.read().split()
    except (OSError, ValueError):
        return True
    return not (state == "Off" and now >= float(apply_time))


def reset_action(identity):
    reset_type = (flask.request.get_json(silent=True) or {}).get("ResetType", "")
    response = _original_reset(identity)
    with _lock:
        _resets.append({"time": time.time(), "system": identity, "reset_type": reset_type})
    if RACK_POWER and RACK_ROLE == "shelf":
        system = app.systems._get(app.systems.uuid(identity))
        pending = system.get("pending_power")
        state = pending["power_state"] if pending else system["power_state"]
        apply_time = pending["apply_time"] if pending else time.time()
        state = "On" if "On" in state or "Restart" in state else "Off"
        with open(RACK_POWER, "w") as f:
            f.write("%s %s\n" % (state, apply_time))
    return response


app.view_functions["system_reset_action"] = reset_action


@app.before_request
def rack_power_gate():
    if not RACK_POWER or RACK_ROLE != "tray" or flask.request.path.startswith("/rackflow/"):
        return None
    if not _rack_fed(time.time()):
        with _lock:
            _power["refused"] += 1
            _power["lost"] = True
        return _error(503, "no power: the rack's power shelves are off")
    if _power["lost"]:
        # Back on: the host lost power with the rack.
        for uuid in app.systems.systems:
            app.systems._update(uuid, power_state="Off", pending_power=None)
        _power["lost"] = False
    return None


@app.route("/rackflow/resets")
def reset_log():
    with _lock:
        return _json(list(_resets))


@app.route("/rackflow/power")
def power_log():
    with _lock:
        return _json({"refused": _power["refused"]})


LEAK_DETECTORS = [d for d in os.environ.get(
    "RACKFLOW_LEAK_DETECTORS", "ColdPlate,Manifold").split(",") if d.strip()]
_leaks = {d.strip(): "OK" for d in LEAK_DETECTORS}
_original_chassis = app.view_functions["chassis_resource"]


def _thermal_uri(identity):
    return "/redfish/v1/Chassis/%s/ThermalSubsystem" % identity


def _first_chassis(identity):
    """Whether `identity` names the chassis that holds the leak detectors
    (like sushy, the first one gets the resources); 404 for no chassis."""
    try:
        uuid = app.chassis.uuid(identity)
    except Exception:  # noqa: BLE001 - sushy raises its own NotFound
        flask.abort(_error(404, "No chassis %s" % identity, "Base.1.0.ResourceMissingAtURI"))
    return uuid == app.chassis.chassis[0]


CHASSIS_SERIAL = os.environ.get("RACKFLOW_CHASSIS_SERIAL", "1821220000000")
SLOT_NUMBER = os.environ.get("RACKFLOW_SLOT_NUMBER", "7")
TRAY_INDEX = os.environ.get("RACKFLOW_TRAY_INDEX", "3")


def chassis_resource(identity):
    response = _original_chassis(identity)
    if flask.request.method != "GET" or response.status_code != 200:
        return response
    body = json.loads(response.get_data())
    body["ThermalSubsystem"] = {"@odata.id": _thermal_uri(identity)}
    if _first_chassis(identity) and SLOT_NUMBER:
        body["SerialNumber"] = CHASSIS_SERIAL
        body.setdefault("Oem", {})["Nvidia"] = {
            "@odata.type": "#NvidiaChassis.v1_4_0.NvidiaCBCChassis",
            "ChassisPhysicalSlotNumber": int(SLOT_NUMBER),
            "ComputeTrayIndex": int(TRAY_INDEX),
            "RevisionId": 2,
            "TopologyId": 0,
        }
    return _json(body)


def thermal_subsystem(identity):
    body = {"@odata.type": "#ThermalSubsystem.v1_3_0.ThermalSubsystem",
            "@odata.id": _thermal_uri(identity), "Id": "ThermalSubsystem",
            "Name": "Thermal Subsystem", "Status": {"State": "Enabled", "Health": "OK"}}
    if _first_chassis(identity) and LEAK_DETECTORS:
        body["LeakDetection"] = {"@odata.id": _thermal_uri(identity) + "/LeakDetection"}
    return _json(body)


def _detection_or_404(identity):
    if not (_first_chassis(identity) and LEAK_DETECTORS):
        flask.abort(_error(404, "Chassis %s has no leak detection" % identity,
                           "Base.1.0.ResourceMissingAtURI"))
    return _thermal_uri(identity) + "/LeakDetection"


def leak_detection(identity):
    uri = _detection_or_404(identity)
    with _lock:
        worst = "OK"
        for state in _leaks.values():
            if state == "Critical" or (state == "Warning" and worst == "OK"):
                worst = state
    return _json({"@odata.type": "#LeakDetection.v1_1_0.LeakDetection", "@odata.id": uri,
                  "Id": "LeakDetection", "Name": "Leak Detection",
                  "Status": {"State": "Enabled", "Health": worst},
                  "LeakDetectors": {"@odata.id": uri + "/LeakDetectors"}})


def leak_detectors(identity):
    uri = _detection_or_404(identity) + "/LeakDetectors"
    members = [{"@odata.id": "%s/%s" % (uri, d)} for d in _leaks]
    return _json({"@odata.type": "#LeakDetectorCollection.LeakDetectorCollection",
                  "@odata.id": uri, "Name": "Leak Detectors",
                  "Members": members, "Members@odata.count": len(members)})


def leak_detector(identity, detector):
    uri = _detection_or_404(identity) + "/LeakDetectors/" + detector
    with _lock:
        state = _leaks.get(detector)
    if state is None:
        return _error(404, "No leak detector %s" % detector, "Base.1.0.ResourceMissingAtURI")
    return _json({"@odata.type": "#LeakDetector.v1_3_0.LeakDetector", "@odata.id": uri,
                  "Id": detector, "Name": "%s leak detector" % detector,
                  "LeakDetectorType": "Moisture", "DetectorState": state,
                  "Status": {"State": "Enabled", "Health": state}})


app.view_functions["chassis_resource"] = chassis_resource
app.add_url_rule("/redfish/v1/Chassis/<identity>/ThermalSubsystem",
                 "rackflow_thermal_subsystem", thermal_subsystem)
app.add_url_rule("/redfish/v1/Chassis/<identity>/ThermalSubsystem/LeakDetection",
                 "rackflow_leak_detection", leak_detection)
app.add_url_rule("/redfish/v1/Chassis/<identity>/ThermalSubsystem/LeakDetection/LeakDetectors",
                 "rackflow_leak_detectors", leak_detectors)
app.add_url_rule(
    "/redfish/v1/Chassis/<identity>/ThermalSubsystem/LeakDetection/LeakDetectors/<detector>",
    "rackflow_leak_detector", leak_detector)


@app.route("/rackflow/leak", methods=["GET", "POST"])
def leak_admin():
    if flask.request.method == "GET":
        with _lock:
            return _json(dict(_leaks))
    request = flask.request.get_json(silent=True) or {}
    detector, state = request.get("detector"), request.get("state")
    if state not in ("OK", "Warning", "Critical"):
        return _error(400, "state must be OK, Warning or Critical")
    with _lock:
        if detector not in _leaks:
            return _error(404, "No leak detector %s" % detector)
        _leaks[detector] = state
    return flask.Response("", status=204)


if __name__ == "__main__":
    sys.exit(sushy_main.main())
