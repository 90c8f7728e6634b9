"""One module per AWS service. Each adapter takes its boto3 client as an argument."""
