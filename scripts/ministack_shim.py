"""Starts ministack (the same server as the `ministack` command, configured by the same
environment variables) with two shims where it differs from AWS in ways the Sundial stack meets.
scripts/deploy-local runs it; docs/decisions.md ("Deployed stack on ministack") lists the gaps.

1. IAM: the SQS batch APIs are authorised as their single-message action, as AWS does:
   SendMessageBatch needs sqs:SendMessage, DeleteMessageBatch sqs:DeleteMessage,
   ChangeMessageVisibilityBatch sqs:ChangeMessageVisibility ("You cannot set permissions
   explicitly for SendMessageBatch, ...", https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-batch-api.html).
   ministack asks for sqs:SendMessageBatch, an action no IAM policy can grant, so the tick's
   SendMessageBatch was denied under the template's least-privilege roles.

2. CloudFormation: `ScalingConfig.MaximumConcurrency: !Ref WorkerMaxConcurrency` (a Number
   parameter) reaches the event source mapping as the string "10" (a Ref to a parameter is a
   string); AWS converts it to the property's type, Integer. ministack stores the string and its
   SQS poller then fails on every poll ("'>=' not supported between instances of 'int' and
   'str'"), so the worker never ran. Converted to int here for the mapping's create and update.
"""

import ministack.core.iam_actions as iam_actions

_SQS_BATCH = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
_extract_iam_action = iam_actions.extract_iam_action


def extract_iam_action(*args, **kwargs):
    action = _extract_iam_action(*args, **kwargs)
    return _SQS_BATCH.get(action, action)


# ministack imports the function from the module at each request, so replacing the module's
# attribute is enough.
iam_actions.extract_iam_action = extract_iam_action

from ministack.services.cloudformation import provisioners  # noqa: E402


def _integer_scaling(props):
    scaling = props.get("ScalingConfig") if isinstance(props, dict) else None
    if isinstance(scaling, dict) and isinstance(scaling.get("MaximumConcurrency"), str):
        value = scaling["MaximumConcurrency"]
        try:
            number = int(value)
        except ValueError:
            return props  # left for ministack to refuse, as AWS would
        props = {**props, "ScalingConfig": {**scaling, "MaximumConcurrency": number}}
    return props


_esm = provisioners._RESOURCE_HANDLERS["AWS::Lambda::EventSourceMapping"]
_esm_create, _esm_update = _esm["create"], _esm["update"]
_esm["create"] = lambda logical_id, props, stack_name: _esm_create(
    logical_id, _integer_scaling(props), stack_name
)
_esm["update"] = lambda physical_id, old, new, stack_name: _esm_update(
    physical_id, _integer_scaling(old), _integer_scaling(new), stack_name
)

if __name__ == "__main__":
    from ministack.app import main

    main()
